//! Fetch sessions (KIP-227): after a full fetch opens a session, each request names only the
//! partitions whose fetch position changed, and those that leave the session.
//!
//! One session per broker. Any failed request or session error (`FETCH_SESSION_ID_NOT_FOUND`
//! after eviction, `INVALID_FETCH_SESSION_EPOCH`) starts over with a full request; a broker
//! whose session cache is full answers with session id 0, and every request stays full.
//!
//! A session names its topics one way for its whole life: by id (Fetch v13+, KIP-516) when
//! every topic it fetches has one, by name otherwise. A change of way, or a topic whose id
//! changed (deleted and created again), starts a new session: the broker keys a session's
//! partitions by topic id, and the old topic's partitions cannot be forgotten by name.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use crate::client::cluster::{NIL_TOPIC_ID, TopicId};

/// Topic ids by name.
pub(crate) type TopicIds = HashMap<Arc<str>, TopicId>;

/// A partition's part of a fetch request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FetchPosition {
    /// The offset to read from.
    pub offset: i64,
    /// The leader epoch the client knows (-1 when unknown).
    pub leader_epoch: i32,
    /// `max.partition.fetch.bytes`.
    pub max_bytes: i32,
}

/// What one request carries.
#[derive(Debug, Default)]
pub(crate) struct SessionRequest {
    /// 0 for a new session.
    pub session_id: i32,
    /// 0 opens a session; 1.. continue it.
    pub epoch: i32,
    /// The partitions to send (all of them on a full request, changes otherwise).
    pub partitions: Vec<((Arc<str>, i32), FetchPosition)>,
    /// Partitions leaving the session.
    pub forgotten: Vec<(Arc<str>, i32)>,
    /// The id of every topic the request names, when the session names topics by id.
    pub topic_ids: Option<TopicIds>,
}

/// The client side of one broker's fetch session.
#[derive(Debug, Default)]
pub(crate) struct FetchSession {
    id: i32,
    /// The epoch of the next request; 0 means the next request is full.
    epoch: i32,
    /// What the broker's session holds after the last request succeeded.
    known: HashMap<(Arc<str>, i32), FetchPosition>,
    /// The ids of the topics of `known`, and whether the session names topics by id.
    ids: TopicIds,
    by_id: bool,
    /// What the request in flight asks the session to hold.
    pending: Option<Pending>,
}

/// What a request in flight asks its session to become.
#[derive(Debug)]
struct Pending {
    known: HashMap<(Arc<str>, i32), FetchPosition>,
    ids: TopicIds,
    by_id: bool,
}

impl FetchSession {
    /// The request that fetches exactly `wanted`, whose topics have the ids `ids` (a topic
    /// missing from it, or with a nil id, has none).
    pub(crate) fn request(
        &mut self,
        wanted: &[((Arc<str>, i32), FetchPosition)],
        ids: &TopicIds,
    ) -> SessionRequest {
        let id_of = |topic: &Arc<str>| ids.get(topic).copied().filter(|id| *id != NIL_TOPIC_ID);
        let by_id = wanted.iter().all(|((t, _), _)| id_of(t).is_some());
        let recreated = wanted.iter().any(|((t, _), _)| {
            matches!((self.ids.get(t), id_of(t)), (Some(was), Some(now)) if *was != now)
        });
        if self.epoch != 0 && (by_id != self.by_id || recreated) {
            self.reset();
        }
        let next: HashMap<_, _> = wanted.iter().cloned().collect();
        let next_ids: TopicIds = wanted
            .iter()
            .filter_map(|((t, _), _)| id_of(t).map(|id| (t.clone(), id)))
            .collect();
        let full = self.epoch == 0;
        let partitions = wanted
            .iter()
            .filter(|(key, position)| full || self.known.get(key) != Some(position))
            .cloned()
            .collect();
        let forgotten = if full {
            Vec::new()
        } else {
            self.known
                .keys()
                .filter(|key| !next.contains_key(*key))
                .cloned()
                .collect()
        };
        let topic_ids = by_id.then(|| {
            let mut named = next_ids.clone();
            for (topic, _) in &forgotten {
                if let Some(id) = self.ids.get(topic) {
                    named.insert(topic.clone(), *id);
                }
            }
            named
        });
        self.pending = Some(Pending {
            known: next,
            ids: next_ids,
            by_id,
        });
        SessionRequest {
            session_id: if full { 0 } else { self.id },
            epoch: self.epoch,
            partitions,
            forgotten,
            topic_ids,
        }
    }

    /// Records the outcome of the request built last: its top-level error and session id.
    pub(crate) fn answered(&mut self, error: Option<ResponseError>, session_id: i32) {
        let pending = self.pending.take();
        match (error, pending) {
            (None, Some(next)) => {
                if self.epoch == 0 {
                    if session_id == 0 {
                        // No session: the next request is full again.
                        self.known.clear();
                        self.ids.clear();
                        return;
                    }
                    self.id = session_id;
                }
                self.known = next.known;
                self.ids = next.ids;
                self.by_id = next.by_id;
                self.epoch = if self.epoch == i32::MAX {
                    1
                } else {
                    self.epoch + 1
                };
            }
            _ => self.reset(),
        }
    }

    /// Forgets the session: the next request is full.
    pub(crate) fn reset(&mut self) {
        self.id = 0;
        self.epoch = 0;
        self.known.clear();
        self.ids.clear();
        self.by_id = false;
        self.pending = None;
    }

    /// Whether the next request is a full one.
    #[cfg(test)]
    pub(crate) fn is_full(&self) -> bool {
        self.epoch == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(topic: &str, partition: i32, offset: i64) -> ((Arc<str>, i32), FetchPosition) {
        (
            (Arc::from(topic), partition),
            FetchPosition {
                offset,
                leader_epoch: 0,
                max_bytes: 100,
            },
        )
    }

    #[test]
    fn full_then_incremental_then_reset() {
        let mut s = FetchSession::default();
        let r = s.request(&[at("a", 0, 5), at("a", 1, 7)], &TopicIds::new());
        assert_eq!((r.session_id, r.epoch, r.partitions.len()), (0, 0, 2));
        s.answered(None, 42);
        assert!(!s.is_full());

        // Only the partition that moved is sent; the one left out is forgotten.
        let r = s.request(&[at("a", 0, 9), at("a", 1, 7)], &TopicIds::new());
        assert_eq!((r.session_id, r.epoch), (42, 1));
        assert_eq!(r.partitions, vec![at("a", 0, 9)]);
        assert!(r.forgotten.is_empty());
        s.answered(None, 42);

        let r = s.request(&[at("a", 1, 7), at("b", 0, 0)], &TopicIds::new());
        assert_eq!(r.epoch, 2);
        assert_eq!(r.partitions, vec![at("b", 0, 0)]);
        assert_eq!(r.forgotten, vec![(Arc::from("a"), 0)]);
        s.answered(Some(ResponseError::FetchSessionIdNotFound), 0);
        assert!(s.is_full());

        let r = s.request(&[at("a", 1, 7)], &TopicIds::new());
        assert_eq!((r.session_id, r.epoch, r.partitions.len()), (0, 0, 1));
    }

    #[test]
    fn no_session_from_the_broker_keeps_requests_full() {
        let mut s = FetchSession::default();
        s.request(&[at("a", 0, 5)], &TopicIds::new());
        s.answered(None, 0);
        assert!(s.is_full());
        let r = s.request(&[at("a", 0, 5)], &TopicIds::new());
        assert_eq!(r.partitions.len(), 1);
    }

    #[test]
    fn a_failed_request_resets() {
        let mut s = FetchSession::default();
        s.request(&[at("a", 0, 5)], &TopicIds::new());
        s.answered(None, 3);
        s.request(&[at("a", 0, 6)], &TopicIds::new());
        s.reset();
        assert!(s.is_full());
    }

    #[test]
    fn epoch_wraps_to_one() {
        let mut s = FetchSession {
            id: 1,
            epoch: i32::MAX,
            ..FetchSession::default()
        };
        s.request(&[at("a", 0, 0)], &TopicIds::new());
        s.answered(None, 1);
        assert_eq!(s.epoch, 1);
    }

    fn ids(pairs: &[(&str, u8)]) -> TopicIds {
        pairs
            .iter()
            .map(|&(t, n)| {
                let mut id = [0u8; 16];
                id[0] = n;
                (Arc::from(t), id)
            })
            .collect()
    }

    /// A session by id names forgotten topics by the id it knew them under; a topic created
    /// again (new id), or a topic without an id, starts a new session.
    #[test]
    fn topic_ids_name_the_session_and_a_new_id_starts_another() {
        let mut s = FetchSession::default();
        let r = s.request(&[at("a", 0, 5), at("b", 0, 1)], &ids(&[("a", 1), ("b", 2)]));
        assert_eq!(r.topic_ids, Some(ids(&[("a", 1), ("b", 2)])));
        s.answered(None, 42);

        // b leaves: forgotten under its id, though the caller no longer gives it.
        let r = s.request(&[at("a", 0, 6)], &ids(&[("a", 1)]));
        assert_eq!((r.session_id, r.epoch), (42, 1));
        assert_eq!(r.forgotten, vec![(Arc::from("b"), 0)]);
        assert_eq!(r.topic_ids, Some(ids(&[("a", 1), ("b", 2)])));
        s.answered(None, 42);

        // a was deleted and created again: a new session, full.
        let r = s.request(&[at("a", 0, 0)], &ids(&[("a", 7)]));
        assert_eq!((r.session_id, r.epoch, r.partitions.len()), (0, 0, 1));
        assert_eq!(r.topic_ids, Some(ids(&[("a", 7)])));
        s.answered(None, 43);

        // A topic without an id: the session names topics again, in a new session.
        let r = s.request(&[at("a", 0, 1), at("c", 0, 0)], &ids(&[("a", 7)]));
        assert_eq!((r.session_id, r.epoch, r.partitions.len()), (0, 0, 2));
        assert_eq!(r.topic_ids, None);
    }
}
