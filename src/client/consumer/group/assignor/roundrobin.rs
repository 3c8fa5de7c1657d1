//! `roundrobin`: all partitions dealt one by one around the circle of members.
//!
//! The partitions of every subscribed topic, by topic name then number, go in turn to the
//! members in [`java_member_order`], passing over a member not subscribed to the partition's
//! topic. The deal continues where the previous topic stopped, so with identical subscriptions
//! shares differ by at most one partition over all topics (where `range` can give the first
//! member one extra partition per topic). With different subscriptions there is no such bound.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    Assignor, Plan, PlanBuilder, RebalanceProtocol, distinct_members, java_member_order,
    partition_count,
};
use crate::client::consumer::group::protocol::MemberSubscription;

/// The `roundrobin` assignor (eager).
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &'static str {
        "roundrobin"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    fn assign(&self, members: &[MemberSubscription], partitions: &BTreeMap<String, i32>) -> Plan {
        let circle = distinct_members(members, java_member_order);
        let subscriptions: Vec<BTreeSet<&str>> = circle
            .iter()
            .map(|m| m.topics.iter().map(String::as_str).collect())
            .collect();
        let mut plan = PlanBuilder::new(members);
        let mut next = 0;
        for topic in partitions.keys() {
            let Some(count) = partition_count(partitions, topic) else {
                continue;
            };
            for partition in 0..count {
                // A lap at most; a topic nobody subscribes to finds no one and is skipped.
                let Some(seat) = (0..circle.len())
                    .map(|step| (next + step) % circle.len())
                    .find(|&seat| subscriptions[seat].contains(topic.as_str()))
                else {
                    break;
                };
                plan.give(&circle[seat].member_id, topic, partition);
                next = (seat + 1) % circle.len();
            }
        }
        plan.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::RoundRobinAssignor;
    use crate::client::consumer::group::assignor::Assignor;
    use crate::client::consumer::group::assignor::test_support::{
        check_plan, loads, member, random_group, share, topics,
    };

    #[test]
    fn identical_subscriptions() {
        let members = [member("c1", &["t0", "t1"]), member("c0", &["t1", "t0"])];
        let plan = RoundRobinAssignor.assign(&members, &topics(&[("t0", 3), ("t1", 3)]));
        assert_eq!(plan["c0"], share(&[("t0", &[0, 2]), ("t1", &[1])]));
        assert_eq!(plan["c1"], share(&[("t0", &[1]), ("t1", &[0, 2])]));
    }

    #[test]
    fn different_subscriptions() {
        let members = [
            member("c0", &["t0"]),
            member("c1", &["t0", "t1"]),
            member("c2", &["t0", "t1", "t2"]),
        ];
        let plan = RoundRobinAssignor.assign(&members, &topics(&[("t0", 1), ("t1", 2), ("t2", 3)]));
        assert_eq!(plan["c0"], share(&[("t0", &[0])]));
        assert_eq!(plan["c1"], share(&[("t1", &[0])]));
        assert_eq!(plan["c2"], share(&[("t1", &[1]), ("t2", &[0, 1, 2])]));
    }

    #[test]
    fn static_members_first() {
        let mut late = member("a", &["t"]);
        late.instance_id = Some("z".to_owned());
        let members = [member("b", &["t"]), late, member("c", &["t", "gone"])];
        let plan = RoundRobinAssignor.assign(&members, &topics(&[("t", 5)]));
        assert_eq!(plan["a"], share(&[("t", &[0, 3])]));
        assert_eq!(plan["b"], share(&[("t", &[1, 4])]));
        assert_eq!(plan["c"], share(&[("t", &[2])]));
    }

    #[test]
    fn random_groups() {
        let mut rng = fastrand::Rng::with_seed(12);
        for _ in 0..500 {
            let (mut members, partitions) = random_group(&mut rng);
            let plan = RoundRobinAssignor.assign(&members, &partitions);
            check_plan(&plan, &members, &partitions, true);
            if members.windows(2).all(|w| w[0].topics == w[1].topics) {
                let loads = loads(&plan);
                let (min, max) = (loads.values().min(), loads.values().max());
                assert!(
                    max.zip(min).is_some_and(|(max, min)| max - min <= 1),
                    "{loads:?}"
                );
            }
            rng.shuffle(&mut members);
            assert_eq!(
                RoundRobinAssignor.assign(&members, &partitions),
                plan,
                "order-free"
            );
        }
    }
}
