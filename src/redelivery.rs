//! [`ToSourceTopic`]: retry copies go back to the topic their delivery came from.

use ruststream::runtime::{ForReply, Names, Outgoing, PublishContext, PublishTransform};

use crate::context::KafkaContext;
use crate::context::keys::Topic;

/// A publish transform for retry copies: the destination is the topic of the delivery being
/// retried, so a subscription over several topics sends each copy back where it came from.
/// It reads [`KafkaContext`], so it mounts on handlers that have one (batch handlers name a
/// topic with `.to(..)` instead).
///
/// Only a copy addressed to the subscription itself is redirected. The runtime sends a delivery
/// whose attempts are spent through the same retry position, addressed to the declared
/// `dead_letter(..)` topic; that address is kept, or the spent copy would return to its source
/// and circle there forever.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToSourceTopic;

impl<Options> PublishTransform<ForReply<KafkaContext>, Options> for ToSourceTopic {
    type Destination = Names;

    fn apply(
        &self,
        out: &mut Outgoing<'_>,
        _options: &mut Option<Options>,
        cx: &PublishContext<'_, KafkaContext>,
    ) {
        if out.name() == cx.name() {
            out.set_name(cx.context(Topic).clone());
        }
    }
}
