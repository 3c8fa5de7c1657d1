//! `range`: each topic on its own, cut into contiguous ranges, one per subscriber.
//!
//! A topic's subscribers are taken in [`java_member_order`]; with `n` of them and `count`
//! partitions, each gets `count / n` consecutive partitions and the first `count % n` one more.
//! Members that subscribe to the same topics with the same partition counts therefore get the
//! same partition numbers in each, which is what joins between co-partitioned topics need; the
//! price is that the extra partitions of every topic land on the same first members.
//!
//! Kafka's Java client (3.5 and later) also moves ranges to match `client.rack` with the
//! replicas' racks when it knows them; the plan here only sees partition counts, so it is the
//! classic one, which is also what the Java client computes when racks are unknown.

use std::collections::BTreeMap;

use super::{
    Assignor, Plan, PlanBuilder, RebalanceProtocol, distinct_members, java_member_order,
    partition_count,
};
use crate::client::consumer::group::protocol::MemberSubscription;

/// The `range` assignor (eager).
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    fn assign(&self, members: &[MemberSubscription], partitions: &BTreeMap<String, i32>) -> Plan {
        let ordered = distinct_members(members, java_member_order);
        let mut plan = PlanBuilder::new(members);
        for topic in partitions.keys() {
            let Some(count) = partition_count(partitions, topic) else {
                continue;
            };
            let subscribers: Vec<&MemberSubscription> = ordered
                .iter()
                .copied()
                .filter(|m| m.topics.iter().any(|t| t == topic))
                .collect();
            if subscribers.is_empty() {
                continue;
            }
            // `count` is positive, so it fits; the partition numbers below stay under it.
            let count = count as usize;
            let (each, extra) = (count / subscribers.len(), count % subscribers.len());
            for (i, member) in subscribers.iter().enumerate() {
                let start = i * each + i.min(extra);
                let len = each + usize::from(i < extra);
                for partition in start..start + len {
                    plan.give(&member.member_id, topic, partition as i32);
                }
            }
        }
        plan.finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::RangeAssignor;
    use crate::client::consumer::group::assignor::Assignor;
    use crate::client::consumer::group::assignor::test_support::{
        check_plan, member, random_group, share, subscribes, topics,
    };

    #[test]
    fn two_members_two_topics() {
        let members = [member("c1", &["t1", "t0"]), member("c0", &["t0", "t1"])];
        let plan = RangeAssignor.assign(&members, &topics(&[("t0", 3), ("t1", 3)]));
        assert_eq!(plan["c0"], share(&[("t0", &[0, 1]), ("t1", &[0, 1])]));
        assert_eq!(plan["c1"], share(&[("t0", &[2]), ("t1", &[2])]));
    }

    #[test]
    fn mixed_subscriptions_and_missing_topics() {
        let members = [
            member("a", &["t0"]),
            member("b", &["t0", "t1", "later"]),
            member("c", &["t1"]),
            member("d", &["later"]),
        ];
        let plan = RangeAssignor.assign(&members, &topics(&[("t0", 5), ("t1", 2), ("x", 9)]));
        assert_eq!(plan["a"], share(&[("t0", &[0, 1, 2])]));
        assert_eq!(plan["b"], share(&[("t0", &[3, 4]), ("t1", &[0])]));
        assert_eq!(plan["c"], share(&[("t1", &[1])]));
        assert_eq!(plan["d"], share(&[]));
        // More members than partitions: the last ones get nothing.
        let many: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .map(|m| member(m, &["t"]))
            .collect();
        let plan = RangeAssignor.assign(&many, &topics(&[("t", 2)]));
        assert_eq!(plan["a"], share(&[("t", &[0])]));
        assert_eq!(plan["b"], share(&[("t", &[1])]));
        assert!(plan["c"].is_empty() && plan["d"].is_empty());
    }

    #[test]
    fn static_members_first_by_instance_id() {
        let mut a = member("a", &["t"]);
        let mut b = member("b", &["t"]);
        let mut c = member("c", &["t"]);
        let d = member("0-dynamic", &["t"]);
        b.instance_id = Some("i-2".to_owned());
        c.instance_id = Some("i-1".to_owned());
        a.instance_id = None;
        let plan = RangeAssignor.assign(&[a, b, c, d], &topics(&[("t", 7)]));
        // Order: c (i-1), b (i-2), then dynamic members by id: 0-dynamic, a.
        assert_eq!(plan["c"], share(&[("t", &[0, 1])]));
        assert_eq!(plan["b"], share(&[("t", &[2, 3])]));
        assert_eq!(plan["0-dynamic"], share(&[("t", &[4, 5])]));
        assert_eq!(plan["a"], share(&[("t", &[6])]));
    }

    #[test]
    fn random_groups() {
        let mut rng = fastrand::Rng::with_seed(11);
        for _ in 0..500 {
            let (mut members, partitions) = random_group(&mut rng);
            let plan = RangeAssignor.assign(&members, &partitions);
            let holder = check_plan(&plan, &members, &partitions, true);
            // Per topic, the subscribers' shares differ by at most one, larger ones first.
            for (topic, &count) in &partitions {
                let mut per_member: BTreeMap<&str, usize> = members
                    .iter()
                    .filter(|m| subscribes(m, topic))
                    .map(|m| (m.member_id.as_str(), 0))
                    .collect();
                for p in 0..count {
                    if let Some(id) = holder.get(&(topic.clone(), p)) {
                        *per_member.get_mut(id.as_str()).expect("subscriber") += 1;
                    }
                }
                let shares: Vec<usize> = per_member.values().copied().collect();
                assert!(shares.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1));
            }
            rng.shuffle(&mut members);
            assert_eq!(
                RangeAssignor.assign(&members, &partitions),
                plan,
                "order-free"
            );
        }
    }
}
