//! Classic consumer-group assignors: the group leader runs one over every member's
//! subscription and sends each member its share through `SyncGroup`.
//!
//! Every assignor here keeps the same contract. A partition goes to at most one member, and
//! only to a member subscribed to its topic. Every member of the input is in the plan, possibly
//! with nothing. Topics missing from the metadata (not created yet) are skipped. The same input
//! gives the same plan, whatever the order of the members, so a leader that runs twice does
//! not reshuffle the group. The eager assignors (`range`, `roundrobin`) assign every partition;
//! `cooperative-sticky` may hold a partition back for one round while its owner lets go of it.

mod range;
mod roundrobin;
mod sticky;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use range::RangeAssignor;
pub use roundrobin::RoundRobinAssignor;
pub use sticky::CooperativeStickyAssignor;

use super::protocol::MemberSubscription;

/// How members hand partitions over during a rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceProtocol {
    /// Every member gives up all its partitions before it rejoins; the plan may move anything.
    Eager,
    /// Members keep consuming what they own through the rebalance (KIP-429); a partition
    /// that changes hands is revoked by its owner first and handed over in a second round.
    Cooperative,
}

/// The leader's plan: each member id's partitions, topics and partitions sorted.
pub type Plan = BTreeMap<String, Vec<(String, Vec<i32>)>>;

/// A strategy that spreads the subscribed topics' partitions over the group's members.
pub trait Assignor: Send + Sync + std::fmt::Debug {
    /// The protocol name in `JoinGroup`, as `partition.assignment.strategy` spells it.
    fn name(&self) -> &'static str;

    /// How the plan's changes are applied by the members.
    fn protocol(&self) -> RebalanceProtocol;

    /// Computes the plan for `members`, given each existing topic's partition count.
    fn assign(&self, members: &[MemberSubscription], partitions: &BTreeMap<String, i32>) -> Plan;
}

/// The assignor with this `partition.assignment.strategy` name (`range`, `roundrobin`,
/// `cooperative-sticky`), ignoring case and surrounding blanks.
#[must_use]
pub fn by_name(name: &str) -> Option<Arc<dyn Assignor>> {
    let name = name.trim();
    let all: [Arc<dyn Assignor>; 3] = [
        Arc::new(RangeAssignor),
        Arc::new(RoundRobinAssignor),
        Arc::new(CooperativeStickyAssignor),
    ];
    all.into_iter()
        .find(|a| a.name().eq_ignore_ascii_case(name))
}

/// The order in which `range` and `roundrobin` serve members, Kafka's Java client's: static
/// members first, by `group.instance.id`, then dynamic ones by member id. Static members come
/// first so that their shares depend only on instance ids, which survive restarts, and not on
/// the member ids the coordinator hands out anew. (Rust compares strings by UTF-8 bytes, Java
/// by UTF-16 units; the two orders differ only for characters above U+FFFF.)
fn java_member_order(a: &MemberSubscription, b: &MemberSubscription) -> Ordering {
    match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// Each member id once (its first entry), in `order`: a repeated id must not get two shares
/// in a plan that has one entry per id.
fn distinct_members(
    members: &[MemberSubscription],
    order: fn(&MemberSubscription, &MemberSubscription) -> Ordering,
) -> Vec<&MemberSubscription> {
    let mut seen = BTreeSet::new();
    let mut distinct: Vec<&MemberSubscription> = members
        .iter()
        .filter(|m| seen.insert(m.member_id.as_str()))
        .collect();
    distinct.sort_by(|a, b| order(a, b));
    distinct
}

/// The partitions there are to assign in `topic`; none for a count that makes no sense.
fn partition_count(partitions: &BTreeMap<String, i32>, topic: &str) -> Option<i32> {
    partitions.get(topic).copied().filter(|count| *count > 0)
}

/// Collects shares member by member and lays them out as a [`Plan`].
struct PlanBuilder {
    shares: BTreeMap<String, BTreeMap<String, BTreeSet<i32>>>,
}

impl PlanBuilder {
    /// Starts with every member and nothing for anyone.
    fn new(members: &[MemberSubscription]) -> Self {
        let shares = members
            .iter()
            .map(|m| (m.member_id.clone(), BTreeMap::new()))
            .collect();
        PlanBuilder { shares }
    }

    fn give(&mut self, member: &str, topic: &str, partition: i32) {
        if let Some(share) = self.shares.get_mut(member) {
            share.entry(topic.to_owned()).or_default().insert(partition);
        }
    }

    fn finish(self) -> Plan {
        self.shares
            .into_iter()
            .map(|(member, share)| {
                let share = share
                    .into_iter()
                    .map(|(topic, partitions)| (topic, partitions.into_iter().collect()))
                    .collect();
                (member, share)
            })
            .collect()
    }
}

/// Helpers shared by the assignors' tests.
#[cfg(test)]
mod test_support {
    use std::collections::{BTreeMap, BTreeSet};

    use super::super::protocol::MemberSubscription;
    use super::Plan;

    pub(super) fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.to_owned(),
            instance_id: None,
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            owned: Vec::new(),
            generation: -1,
            rack: None,
            user_data: None,
        }
    }

    pub(super) fn topics(counts: &[(&str, i32)]) -> BTreeMap<String, i32> {
        counts.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
    }

    pub(super) fn share(pairs: &[(&str, &[i32])]) -> Vec<(String, Vec<i32>)> {
        pairs
            .iter()
            .map(|(t, ps)| ((*t).to_owned(), ps.to_vec()))
            .collect()
    }

    /// A random group: 1-8 members, 1-5 topics of 1-30 partitions, and random subscriptions
    /// (half of the groups with one subscription for all), sometimes to a topic that does not
    /// exist yet.
    pub(super) fn random_group(
        rng: &mut fastrand::Rng,
    ) -> (Vec<MemberSubscription>, BTreeMap<String, i32>) {
        let partitions: BTreeMap<String, i32> = (0..rng.usize(1..=5))
            .map(|t| (format!("t{t}"), rng.i32(1..=30)))
            .collect();
        let names: Vec<&str> = partitions.keys().map(String::as_str).collect();
        let identical = rng.bool();
        let common = random_topics(rng, &names);
        let members = (0..rng.usize(1..=8))
            .map(|m| {
                let topics = if identical {
                    common.clone()
                } else {
                    random_topics(rng, &names)
                };
                let mut member = member(&format!("m{m}"), &[]);
                member.topics = topics;
                member
            })
            .collect();
        (members, partitions)
    }

    pub(super) fn random_topics(rng: &mut fastrand::Rng, names: &[&str]) -> Vec<String> {
        let mut topics: Vec<String> = names
            .iter()
            .filter(|_| rng.bool())
            .map(|t| (*t).to_owned())
            .collect();
        if topics.is_empty() {
            topics.push(names[rng.usize(..names.len())].to_owned());
        }
        if rng.u8(..) < 40 {
            topics.push("not-created-yet".to_owned());
        }
        rng.shuffle(&mut topics);
        topics
    }

    pub(super) fn subscribes(member: &MemberSubscription, topic: &str) -> bool {
        member.topics.iter().any(|t| t == topic)
    }

    /// Checks the contract every plan keeps and returns each assigned partition's member.
    /// With `complete`, every partition of a subscribed topic must be assigned.
    pub(super) fn check_plan(
        plan: &Plan,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
        complete: bool,
    ) -> BTreeMap<(String, i32), String> {
        let ids: BTreeSet<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
        let planned: BTreeSet<&str> = plan.keys().map(String::as_str).collect();
        assert_eq!(ids, planned, "every member, and only members, in the plan");
        let mut holder = BTreeMap::new();
        for (id, share) in plan {
            let member = members.iter().find(|m| &m.member_id == id).expect("member");
            assert!(
                share.windows(2).all(|w| w[0].0 < w[1].0),
                "topics sorted: {share:?}"
            );
            for (topic, ps) in share {
                assert!(!ps.is_empty(), "no empty topic entry in {share:?}");
                assert!(ps.windows(2).all(|w| w[0] < w[1]), "sorted: {ps:?}");
                assert!(subscribes(member, topic), "{id} got {topic} unsubscribed");
                let count = partitions[topic];
                for &p in ps {
                    assert!((0..count).contains(&p), "{topic}/{p} does not exist");
                    let before = holder.insert((topic.clone(), p), id.clone());
                    assert_eq!(before, None, "{topic}/{p} assigned twice");
                }
            }
        }
        if complete {
            for (topic, &count) in partitions {
                if members.iter().any(|m| subscribes(m, topic)) {
                    for p in 0..count {
                        assert!(
                            holder.contains_key(&(topic.clone(), p)),
                            "{topic}/{p} unassigned"
                        );
                    }
                }
            }
        }
        holder
    }

    pub(super) fn loads(plan: &Plan) -> BTreeMap<&str, usize> {
        plan.iter()
            .map(|(id, share)| (id.as_str(), share.iter().map(|(_, ps)| ps.len()).sum()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{member, topics};
    use super::{RebalanceProtocol, by_name};

    #[test]
    fn names() {
        for (name, canonical, protocol) in [
            ("range", "range", RebalanceProtocol::Eager),
            (" RoundRobin ", "roundrobin", RebalanceProtocol::Eager),
            (
                "Cooperative-Sticky\t",
                "cooperative-sticky",
                RebalanceProtocol::Cooperative,
            ),
        ] {
            let assignor = by_name(name).expect(name);
            assert_eq!(assignor.name(), canonical);
            assert_eq!(assignor.protocol(), protocol);
        }
        assert!(by_name("sticky").is_none());
        assert!(by_name("").is_none());
    }

    #[test]
    fn every_assignor_on_edge_inputs() {
        for name in ["range", "roundrobin", "cooperative-sticky"] {
            let assignor = by_name(name).expect(name);
            assert!(assignor.assign(&[], &topics(&[("t", 3)])).is_empty());
            // Nothing exists yet, or the counts make no sense: everyone gets nothing.
            let members = [member("a", &["t", "u"]), member("b", &["u"])];
            for partitions in [topics(&[]), topics(&[("t", 0), ("u", -4)])] {
                let plan = assignor.assign(&members, &partitions);
                assert_eq!(plan.len(), 2, "{name}");
                assert!(plan.values().all(Vec::is_empty), "{name}: {plan:?}");
            }
            // A repeated member id gets one share.
            let twice = [
                member("a", &["t"]),
                member("a", &["t"]),
                member("b", &["t"]),
            ];
            let plan = assignor.assign(&twice, &topics(&[("t", 4)]));
            let total: usize = plan.values().flatten().map(|(_, ps)| ps.len()).sum();
            assert_eq!(total, 4, "{name}: {plan:?}");
        }
    }
}
