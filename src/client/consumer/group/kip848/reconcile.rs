//! Assignments as the coordinator sends them (partitions by topic id) and the move that takes
//! what the member holds towards what it was assigned.
//!
//! The invariant: an [`Assignment`] never maps a topic to an empty set, so two assignments
//! that hold the same partitions compare equal (the heartbeat decides from that comparison
//! whether the coordinator must hear what the member holds).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kafka_protocol::messages::consumer_group_heartbeat_response::Assignment as WireAssignment;

use crate::client::error::{Error, Result};

/// A topic id as the coordinator names topics.
pub(super) type TopicId = [u8; 16];

/// Partitions by topic id, never an empty set for a topic.
pub(super) type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// The assignment in a response; a negative partition makes the whole answer suspect.
pub(super) fn assignment_of(wire: &WireAssignment) -> Result<Assignment> {
    let mut out = Assignment::new();
    for topic in &wire.topic_partitions {
        if topic.partitions.is_empty() {
            continue;
        }
        let set = out.entry(*topic.topic_id.as_bytes()).or_default();
        for &p in &topic.partitions {
            if p < 0 {
                return Err(Error::protocol(format_args!(
                    "ConsumerGroupHeartbeat assigns partition {p}"
                )));
            }
            set.insert(p);
        }
    }
    Ok(out)
}

/// The next move towards an assignment.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Plan {
    /// Owned but no longer assigned: given back first.
    pub revoke: Assignment,
    /// Assigned, not owned, and of a topic whose name is known.
    pub add: Assignment,
    /// Assigned topics whose names the metadata does not give yet.
    pub unresolved: BTreeSet<TopicId>,
}

/// What to give back and what to take to go from `owned` to `target`, with the topic names
/// known so far.
pub(super) fn plan(
    owned: &Assignment,
    target: &Assignment,
    names: &HashMap<TopicId, Arc<str>>,
) -> Plan {
    let mut out = Plan::default();
    for (id, partitions) in owned {
        let kept = target.get(id);
        let gone: BTreeSet<i32> = partitions
            .iter()
            .filter(|p| !kept.is_some_and(|k| k.contains(p)))
            .copied()
            .collect();
        if !gone.is_empty() {
            out.revoke.insert(*id, gone);
        }
    }
    for (id, partitions) in target {
        let held = owned.get(id);
        let new: BTreeSet<i32> = partitions
            .iter()
            .filter(|p| !held.is_some_and(|h| h.contains(p)))
            .copied()
            .collect();
        if new.is_empty() {
            continue;
        }
        if names.contains_key(id) {
            out.add.insert(*id, new);
        } else {
            out.unresolved.insert(*id);
        }
    }
    out
}

/// Adds `add` to `into`.
pub(super) fn merge(into: &mut Assignment, add: &Assignment) {
    for (id, partitions) in add {
        into.entry(*id).or_default().extend(partitions);
    }
}

/// Takes `remove` out of `from`, dropping topics left with nothing.
pub(super) fn subtract(from: &mut Assignment, remove: &Assignment) {
    for (id, partitions) in remove {
        if let Some(set) = from.get_mut(id) {
            set.retain(|p| !partitions.contains(p));
            if set.is_empty() {
                from.remove(id);
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::client::consumer::group::kip848) const A: TopicId = [1; 16];
    pub(in crate::client::consumer::group::kip848) const B: TopicId = [2; 16];

    pub(in crate::client::consumer::group::kip848) fn assignment(
        entries: &[(TopicId, &[i32])],
    ) -> Assignment {
        entries
            .iter()
            .map(|(id, ps)| (*id, ps.iter().copied().collect()))
            .collect()
    }

    #[test]
    fn revocations_come_before_additions_and_unknown_topics_wait() {
        let names: HashMap<TopicId, Arc<str>> = [(A, Arc::from("a"))].into();
        let owned = assignment(&[(A, &[0, 1, 2])]);
        let target = assignment(&[(A, &[1, 2, 3]), (B, &[0])]);
        let p = plan(&owned, &target, &names);
        assert_eq!(p.revoke, assignment(&[(A, &[0])]));
        assert_eq!(p.add, assignment(&[(A, &[3])]));
        assert_eq!(p.unresolved, [B].into());
        // Reconciled: nothing to do.
        let p = plan(&target, &target, &names);
        assert_eq!(p, Plan::default());
        // Everything goes.
        let p = plan(&owned, &Assignment::new(), &names);
        assert_eq!(p.revoke, owned);
    }

    #[test]
    fn holding_sets_stay_normalised() {
        let mut owned = assignment(&[(A, &[0, 1]), (B, &[0])]);
        subtract(&mut owned, &assignment(&[(B, &[0]), (A, &[1])]));
        assert_eq!(owned, assignment(&[(A, &[0])]));
        merge(&mut owned, &assignment(&[(B, &[3])]));
        assert_eq!(owned, assignment(&[(A, &[0]), (B, &[3])]));
    }

    #[test]
    fn assignments_with_negative_partitions_are_refused() {
        use kafka_protocol::messages::consumer_group_heartbeat_response::TopicPartitions as Tp;
        let ok = WireAssignment::default().with_topic_partitions(vec![
            Tp::default()
                .with_topic_id(uuid::Uuid::from_bytes(A))
                .with_partitions(vec![2, 0]),
            Tp::default().with_topic_id(uuid::Uuid::from_bytes(B)),
        ]);
        assert_eq!(assignment_of(&ok).ok(), Some(assignment(&[(A, &[0, 2])])));
        let bad = WireAssignment::default().with_topic_partitions(vec![
            Tp::default()
                .with_topic_id(uuid::Uuid::from_bytes(A))
                .with_partitions(vec![-1]),
        ]);
        assert!(assignment_of(&bad).is_err());
    }
}
