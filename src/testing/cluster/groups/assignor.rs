//! The server-side assignors of KIP-848 groups: `uniform` (Kafka's default) and `range`.
//!
//! Both compute a target assignment from the members' subscriptions and the partitions of
//! the topics they subscribe to. `uniform` keeps what each member already has where the
//! balance allows, as Kafka's sticky uniform assignor does; `range` hands each member a
//! contiguous range of every topic it subscribes to. The exact placement need not match
//! Kafka's partition for partition: clients only rely on balance and stickiness.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions by topic id; no topic maps to an empty set.
pub(super) type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// The assignors a group accepts, by the name `group.remote.assignor` gives.
pub(super) const NAMES: &[&str] = &["uniform", "range"];

/// What the assignor sees of one member.
#[derive(Debug)]
pub(super) struct Subscriber<'a> {
    pub(super) id: &'a str,
    /// Ids of the existing topics the member subscribes to.
    pub(super) topics: BTreeSet<Uuid>,
    /// What the member is assigned now (its current target), for stickiness.
    pub(super) current: Option<&'a Assignment>,
}

/// Runs the assignor `name` (one of [`NAMES`]; anything else is `uniform`) over `members`,
/// where `partitions` gives the partition count of every subscribed topic.
pub(super) fn assign(
    name: &str,
    members: &[Subscriber<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    if name == "range" {
        range(members, partitions)
    } else {
        uniform(members, partitions)
    }
}

/// Every member with nothing assigned yet.
fn empty_plan(members: &[Subscriber<'_>]) -> BTreeMap<String, Assignment> {
    members
        .iter()
        .map(|m| (m.id.to_owned(), Assignment::new()))
        .collect()
}

fn range(
    members: &[Subscriber<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out = empty_plan(members);
    for (topic, count) in partitions {
        let mut takers: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .map(|m| m.id)
            .collect();
        takers.sort_unstable();
        let Ok(k) = i32::try_from(takers.len()) else {
            continue;
        };
        if k == 0 {
            continue;
        }
        let (base, extra) = (count / k, count % k);
        let mut next = 0;
        for (i, member) in (0..).zip(&takers) {
            let n = base + i32::from(i < extra);
            if n > 0
                && let Some(a) = out.get_mut(*member)
            {
                a.insert(*topic, (next..next + n).collect());
            }
            next += n;
        }
    }
    out
}

fn uniform(
    members: &[Subscriber<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out = empty_plan(members);
    if members.is_empty() {
        return out;
    }
    let mut sorted: Vec<&Subscriber<'_>> = members.iter().collect();
    sorted.sort_by_key(|m| m.id);
    let total: usize = partitions
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.topics.contains(*t)))
        .map(|(_, n)| usize::try_from(*n).unwrap_or(0))
        .sum();
    let (base, mut extra) = (total / members.len(), total % members.len());
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    // Keep what each member has, up to its fair share; a few may keep one more.
    for m in &sorted {
        let mut kept: Vec<(Uuid, i32)> = m
            .current
            .into_iter()
            .flat_map(|a| {
                a.iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            })
            .filter(|(t, p)| m.topics.contains(t) && partitions.get(t).is_some_and(|n| p < n))
            .collect();
        let quota = if kept.len() > base && extra > 0 {
            extra -= 1;
            base + 1
        } else {
            base
        };
        kept.truncate(quota);
        counts.insert(m.id, kept.len());
        for tp in kept {
            taken.insert(tp);
            if let Some(a) = out.get_mut(m.id) {
                a.entry(tp.0).or_default().insert(tp.1);
            }
        }
    }
    // The rest go one by one to the least loaded member subscribed to their topic.
    for (topic, count) in partitions {
        for p in 0..*count {
            if taken.contains(&(*topic, p)) {
                continue;
            }
            let Some(m) = sorted
                .iter()
                .filter(|m| m.topics.contains(topic))
                .min_by_key(|m| counts.get(m.id).copied().unwrap_or(0))
            else {
                continue;
            };
            *counts.entry(m.id).or_default() += 1;
            if let Some(a) = out.get_mut(m.id) {
                a.entry(*topic).or_default().insert(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(n: u64) -> Uuid {
        Uuid::from_u64_pair(1, n)
    }

    fn subscriber(id: &str, topic: Uuid) -> Subscriber<'_> {
        Subscriber {
            id,
            topics: BTreeSet::from([topic]),
            current: None,
        }
    }

    fn sizes(out: &BTreeMap<String, Assignment>) -> Vec<usize> {
        out.values()
            .map(|a| a.values().map(BTreeSet::len).sum())
            .collect()
    }

    #[test]
    fn uniform_balances_and_keeps() {
        let t = topic(1);
        let partitions = BTreeMap::from([(t, 12)]);
        let subs = |id| subscriber(id, t);
        let two = uniform(&[subs("a"), subs("b")], &partitions);
        assert_eq!(sizes(&two), vec![6, 6]);
        let a = two["a"].clone();
        let b = two["b"].clone();
        let three = uniform(
            &[
                Subscriber {
                    current: Some(&a),
                    ..subs("a")
                },
                Subscriber {
                    current: Some(&b),
                    ..subs("b")
                },
                subs("c"),
            ],
            &partitions,
        );
        assert_eq!(sizes(&three), vec![4, 4, 4]);
        // Nothing moved between the first two.
        assert!(three["a"][&t].is_subset(&a[&t]));
        assert!(three["b"][&t].is_subset(&b[&t]));
    }

    #[test]
    fn range_gives_contiguous_ranges() {
        let t = topic(1);
        let partitions = BTreeMap::from([(t, 5)]);
        let subs = |id| subscriber(id, t);
        let out = range(&[subs("b"), subs("a")], &partitions);
        assert_eq!(out["a"][&t], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["b"][&t], BTreeSet::from([3, 4]));
    }
}
