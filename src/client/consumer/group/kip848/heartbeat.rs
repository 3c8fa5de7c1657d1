//! One `ConsumerGroupHeartbeat`: what it says, and sending it.
//!
//! The invariant: a heartbeat leaves out only what the coordinator is known to hold from an
//! answered heartbeat of the same membership. A join (epoch 0) says everything, and after any
//! failure the member forgets what the coordinator knew ([`Sent::default`]), since the
//! coordinator may or may not have seen the last one.

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::client::Client;
use crate::client::coordinator::CoordinatorKind;
use crate::client::error::Result;

use super::super::TopicMatcher;
use super::reconcile::Assignment;

/// v0 came with Kafka 3.7 (early access); v1 (Kafka 4.0) adds the topic regex and requires the
/// member id to come from the client (KIP-1082).
const HEARTBEAT_VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };
/// The member epoch that leaves the group.
const LEAVE_EPOCH: i32 = -1;
/// The member epoch with which a static member leaves but keeps its assignment for a while.
const LEAVE_STATIC_EPOCH: i32 = -2;

/// Everything a heartbeat could say, before leaving out what the coordinator already knows.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Wanted {
    pub group: String,
    pub member_id: String,
    pub epoch: i32,
    pub instance_id: Option<String>,
    pub rack: Option<String>,
    pub rebalance_timeout_ms: i32,
    /// The topic list, or the names a pattern matched here (for a coordinator without v1).
    pub topics: Option<Vec<String>>,
    /// A pattern subscription, as the coordinator should match it.
    pub regex: Option<String>,
    pub assignor: Option<String>,
    pub owned: Assignment,
}

/// What the coordinator was last told, field by field (`None`: nothing it can rely on).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Sent {
    pub rebalance_timeout_ms: Option<i32>,
    pub topics: Option<Vec<String>>,
    pub regex: Option<String>,
    pub assignor: Option<String>,
    pub rack: Option<String>,
    pub owned: Option<Assignment>,
}

/// `want` unless the coordinator already has it.
fn unless_sent<T: PartialEq + Clone>(full: bool, sent: Option<&T>, want: Option<&T>) -> Option<T> {
    want.filter(|w| full || sent != Some(*w)).cloned()
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

impl Sent {
    /// The heartbeat saying `w` at `version`, and what the coordinator knows once it answers.
    pub(super) fn request(
        &self,
        w: &Wanted,
        version: i16,
    ) -> (ConsumerGroupHeartbeatRequest, Sent) {
        // The coordinator checks a join against the whole picture, whatever it heard before.
        let full = w.epoch == 0;
        let (topics, regex) = match &w.regex {
            Some(regex) if version >= 1 => (None, Some(regex)),
            _ => (w.topics.as_ref(), None),
        };
        let next = Sent {
            rebalance_timeout_ms: unless_sent(
                full,
                self.rebalance_timeout_ms.as_ref(),
                Some(&w.rebalance_timeout_ms),
            ),
            topics: unless_sent(full, self.topics.as_ref(), topics),
            regex: unless_sent(full, self.regex.as_ref(), regex),
            assignor: unless_sent(full, self.assignor.as_ref(), w.assignor.as_ref()),
            rack: unless_sent(full, self.rack.as_ref(), w.rack.as_ref()),
            owned: unless_sent(full, self.owned.as_ref(), Some(&w.owned)),
        };
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(text(&w.group)))
            .with_member_id(text(&w.member_id))
            .with_member_epoch(w.epoch)
            // Sent every time: it is how the coordinator tells a static member's heartbeats
            // from a dynamic one's.
            .with_instance_id(w.instance_id.as_deref().map(text))
            .with_rack_id(next.rack.as_deref().map(text))
            .with_rebalance_timeout_ms(next.rebalance_timeout_ms.unwrap_or(-1))
            .with_subscribed_topic_names(
                next.topics
                    .as_ref()
                    .map(|t| t.iter().map(|n| TopicName(text(n))).collect()),
            )
            .with_subscribed_topic_regex(next.regex.as_deref().map(text))
            .with_server_assignor(next.assignor.as_deref().map(text))
            .with_topic_partitions(next.owned.as_ref().map(wire_partitions));
        let known = Sent {
            rebalance_timeout_ms: next.rebalance_timeout_ms.or(self.rebalance_timeout_ms),
            topics: next.topics.or_else(|| self.topics.clone()),
            regex: next.regex.or_else(|| self.regex.clone()),
            assignor: next.assignor.or_else(|| self.assignor.clone()),
            rack: next.rack.or_else(|| self.rack.clone()),
            owned: next.owned.or_else(|| self.owned.clone()),
        };
        (request, known)
    }
}

fn wire_partitions(owned: &Assignment) -> Vec<TopicPartitions> {
    owned
        .iter()
        .map(|(id, partitions)| {
            TopicPartitions::default()
                .with_topic_id(uuid::Uuid::from_bytes(*id))
                .with_partitions(partitions.iter().copied().collect())
        })
        .collect()
}

/// The heartbeat that leaves the group: epoch -1, or -2 for a static member (whose
/// partitions the coordinator then keeps for it until the session times out).
fn leave_request(
    group: &str,
    member_id: &str,
    instance_id: Option<&str>,
) -> ConsumerGroupHeartbeatRequest {
    let epoch = if instance_id.is_some() {
        LEAVE_STATIC_EPOCH
    } else {
        LEAVE_EPOCH
    };
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member_id))
        .with_member_epoch(epoch)
        .with_instance_id(instance_id.map(text))
        .with_rack_id(None)
        .with_rebalance_timeout_ms(-1)
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(None)
        .with_server_assignor(None)
        .with_topic_partitions(None)
}

/// A pattern as the coordinator should match it. The coordinator matches whole topic names,
/// while a [`Subscription::Pattern`](crate::client::consumer::Subscription::Pattern) is searched for in
/// the name, anchored at the start unless it begins with `^` itself (then it is used as
/// written, as librdkafka does); the padding keeps one meaning whichever side matches.
pub(super) fn broker_regex(pattern: &str) -> String {
    if pattern.starts_with('^') {
        format!(".*(?:{pattern}).*")
    } else {
        format!("(?:{pattern}).*")
    }
}

/// An answered heartbeat.
#[derive(Debug)]
pub(super) struct Beat {
    pub version: i16,
    /// What the coordinator knows once this answer is a success.
    pub sent: Sent,
    /// Names a pattern matched here, for a coordinator that cannot match it.
    pub names: Option<Vec<String>>,
    pub response: ConsumerGroupHeartbeatResponse,
}

/// Sends one heartbeat saying `wanted` to the group's coordinator, after matching a pattern
/// here for a coordinator that cannot (v0).
pub(super) async fn heartbeat(
    client: Client,
    matcher: TopicMatcher,
    sent: Sent,
    mut wanted: Wanted,
) -> Result<Beat> {
    let node = client
        .coordinator(CoordinatorKind::Group, &wanted.group)
        .await?;
    let conn = client.connection(node).await?;
    let version = conn.version_of::<ConsumerGroupHeartbeatRequest>(HEARTBEAT_VERSIONS)?;
    let mut names = None;
    if version == 0 && wanted.regex.is_some() && wanted.topics.is_none() {
        let here = matcher.topics(&client).await?;
        wanted.topics = Some(here.clone());
        names = Some(here);
    }
    let (request, sent) = sent.request(&wanted, version);
    let response = conn
        .send(&request, version, client.socket_timeout())
        .await?;
    Ok(Beat {
        version,
        sent,
        names,
        response,
    })
}

/// Sends the heartbeat that leaves the group, within one socket timeout.
pub(super) async fn leave(
    client: &Client,
    group: &str,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<ConsumerGroupHeartbeatResponse> {
    let request = leave_request(group, member_id, instance_id);
    let sent = tokio::time::timeout(client.socket_timeout(), async {
        let node = client.coordinator(CoordinatorKind::Group, group).await?;
        client.send_to(node, HEARTBEAT_VERSIONS, |_| request).await
    })
    .await;
    sent.unwrap_or_else(|_| {
        Err(crate::client::error::Error::Timeout(format!(
            "leaving group {group}"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::super::reconcile::tests::{A, assignment};
    use super::*;

    fn wanted(epoch: i32) -> Wanted {
        Wanted {
            group: "g".into(),
            member_id: "m".into(),
            epoch,
            instance_id: None,
            rack: Some("r1".into()),
            rebalance_timeout_ms: 300_000,
            topics: Some(vec!["t".into()]),
            regex: None,
            assignor: Some("uniform".into()),
            owned: Assignment::new(),
        }
    }

    #[test]
    fn a_join_says_everything_and_later_heartbeats_only_what_changed() {
        let (join, known) = Sent::default().request(&wanted(0), 1);
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.rebalance_timeout_ms, 300_000);
        assert_eq!(join.subscribed_topic_names.as_ref().map(Vec::len), Some(1));
        assert_eq!(join.subscribed_topic_regex, None);
        assert_eq!(join.server_assignor.as_deref(), Some("uniform"));
        assert_eq!(join.rack_id.as_deref(), Some("r1"));
        assert_eq!(join.topic_partitions, Some(vec![]));

        let mut w = wanted(3);
        let (beat, known) = known.request(&w, 1);
        assert_eq!(beat.member_epoch, 3);
        assert_eq!(beat.rebalance_timeout_ms, -1);
        assert_eq!(beat.subscribed_topic_names, None);
        assert_eq!(beat.server_assignor, None);
        assert_eq!(beat.rack_id, None);
        assert_eq!(beat.topic_partitions, None);

        // A new assignment held: the owned partitions go out, and only them.
        w.owned = assignment(&[(A, &[2, 0])]);
        let (ack, known) = known.request(&w, 1);
        let owned = ack.topic_partitions.unwrap_or_default();
        assert_eq!(owned.len(), 1);
        assert_eq!(owned[0].topic_id.as_bytes(), &A);
        assert_eq!(owned[0].partitions, vec![0, 2]);
        assert_eq!(ack.subscribed_topic_names, None);
        let (beat, known) = known.request(&w, 1);
        assert_eq!(beat.topic_partitions, None);

        // After a failure the member forgets what the coordinator knew.
        let _ = known;
        let (full, _) = Sent::default().request(&w, 1);
        assert_eq!(full.rebalance_timeout_ms, 300_000);
        assert!(full.subscribed_topic_names.is_some());
        assert!(full.topic_partitions.is_some());
    }

    #[test]
    fn a_rejoin_repeats_everything_even_if_sent_before() {
        let (_, known) = Sent::default().request(&wanted(0), 1);
        let (rejoin, _) = known.request(&wanted(0), 1);
        assert_eq!(rejoin.rebalance_timeout_ms, 300_000);
        assert!(rejoin.subscribed_topic_names.is_some());
        assert_eq!(rejoin.topic_partitions, Some(vec![]));
    }

    #[test]
    fn patterns_go_as_a_regex_from_v1_and_as_names_before() {
        let mut w = wanted(0);
        w.regex = Some(broker_regex("orders-.*"));
        w.topics = Some(vec!["orders-eu".into()]);
        let (v1, _) = Sent::default().request(&w, 1);
        assert_eq!(v1.subscribed_topic_names, None);
        assert_eq!(
            v1.subscribed_topic_regex.as_deref(),
            Some("(?:orders-.*).*")
        );
        let (v0, _) = Sent::default().request(&w, 0);
        assert_eq!(v0.subscribed_topic_regex, None);
        assert_eq!(
            v0.subscribed_topic_names
                .unwrap_or_default()
                .iter()
                .map(|n| n.0.to_string())
                .collect::<Vec<_>>(),
            vec!["orders-eu".to_owned()]
        );
    }

    #[test]
    fn the_broker_regex_matches_what_the_client_side_pattern_matches() {
        for (pattern, name, expected) in [
            ("orders-.*", "orders-eu", true),
            ("orders", "orders-eu", true),
            ("orders", "old-orders", false),
            ("^orders", "orders-eu", true),
            ("^orders", "old-orders", false),
            // `^` binds to the first alternative only, on both sides.
            ("^a|b", "bx", true),
            ("^a|b", "xb", true),
            ("^a|b", "xa", false),
            ("t$", "t", true),
        ] {
            let whole = regex::Regex::new(&format!("^(?:{})$", broker_regex(pattern)));
            let client_side = TopicMatcher::new(crate::client::consumer::Subscription::Pattern(
                pattern.into(),
            ));
            let (Ok(whole), Ok(TopicMatcher::Pattern(re, _))) = (whole, client_side) else {
                panic!("{pattern}: not a pattern");
            };
            assert_eq!(whole.is_match(name), expected, "{pattern} {name}");
            assert_eq!(
                re.is_match(name),
                expected,
                "{pattern} {name} (client side)"
            );
        }
    }

    #[test]
    fn leaving_uses_the_static_epoch_for_static_members() {
        let dynamic = leave_request("g", "m", None);
        assert_eq!(dynamic.member_epoch, LEAVE_EPOCH);
        assert_eq!(dynamic.instance_id, None);
        assert_eq!(dynamic.topic_partitions, None);
        assert_eq!(dynamic.subscribed_topic_names, None);
        let fixed = leave_request("g", "m", Some("i-1"));
        assert_eq!(fixed.member_epoch, LEAVE_STATIC_EPOCH);
        assert_eq!(fixed.instance_id.as_deref(), Some("i-1"));
    }
}
