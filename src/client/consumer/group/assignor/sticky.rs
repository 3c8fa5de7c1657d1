//! `cooperative-sticky`: balanced, sticky (KIP-54's goals) and cooperative (KIP-429).
//!
//! The plan is made in two steps. First a *target*: every partition of a subscribed topic goes
//! to one subscriber, as balanced as the subscriptions allow, moving as few owned partitions as
//! we can. Then the cooperative rule: a partition whose target is not its current owner is left
//! out of the plan. Its owner sees it missing, revokes it and rejoins; in the next round nobody
//! owns it and it is assigned at once. Partitions nobody owns are assigned in the first round.
//!
//! *Balanced* means the smallest sum of squared member loads. An assignment reaches it exactly
//! when no improving path is left: no chain `u → … → v` in which each member hands one
//! partition to the next, each subscribed to that partition's topic, with
//! `load(v) <= load(u) - 2` (the optimality condition of semi-matchings, from Harvey, Ladner,
//! Lovász and Tamir). Members with identical subscriptions thus end within one partition of
//! each other. The search starts from what the members own and moves owned partitions only
//! once paths over unowned ones are exhausted, always from the most loaded member first. With
//! identical subscriptions a member thus keeps as many of its partitions as its final share
//! holds and never trades one for another; with different ones some member in a chain may
//! have to trade, and the search takes the path that revokes the fewest partitions it can see.
//!
//! *Two rounds, not more.* The partitions a round keeps in place are part of an optimal target,
//! so in the next round placing the held-back ones optimally around them already reaches the
//! optimum, and nothing owned moves again (as long as members and subscriptions stay put).
//!
//! *Owners.* A partition's current owner is the member whose claim (its `owned` list) carries
//! the highest generation; claims from older generations are stale (their member missed a
//! rebalance) and lose. At equal generations (which a healthy group does not produce), a
//! claimant still subscribed to the topic wins, then the smallest member id. Every other
//! claimant finds the partition missing from its share and revokes it. Kafka's Java assignor
//! instead ignores every claim of a member behind the newest generation; judging claims
//! partition by partition keeps a partition that no newer member claims with the only member
//! that may still be consuming it, rather than handing it to another at the same time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{Assignor, Plan, PlanBuilder, RebalanceProtocol};
use crate::client::consumer::group::protocol::MemberSubscription;

/// The `cooperative-sticky` assignor.
#[derive(Debug, Clone, Copy, Default)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &'static str {
        "cooperative-sticky"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    fn assign(&self, members: &[MemberSubscription], partitions: &BTreeMap<String, i32>) -> Plan {
        let mut group = Group::new(members, partitions);
        group.balance();
        group.plan(members)
    }
}

/// The generation a member's claims carry.
///
/// Subscriptions from v2 on have a field for it. Older members of this protocol put it at the
/// end of the assignor's user data instead: Kafka's Java client writes just that `i32`,
/// librdkafka writes its previous assignment followed by it.
fn claim_generation(member: &MemberSubscription) -> i32 {
    if member.generation >= 0 {
        return member.generation;
    }
    member
        .user_data
        .as_deref()
        .and_then(<[u8]>::last_chunk::<4>)
        .map_or(-1, |g| i32::from_be_bytes(*g))
}

/// A partition by topic index and number.
type Partition = (usize, i32);

struct Topic<'a> {
    name: &'a str,
    count: i32,
    /// Indexes of the members subscribed to it, ascending; never empty.
    subscribers: Vec<usize>,
}

/// What a member holds in the target in one topic.
#[derive(Default)]
struct Holding {
    /// Partitions it owns now: moving one makes its owner revoke it.
    kept: BTreeSet<i32>,
    /// Partitions it does not own: moving one costs nothing.
    taken: BTreeSet<i32>,
}

struct Member<'a> {
    id: &'a str,
    load: usize,
    holds: BTreeMap<usize, Holding>,
}

/// One hop of an improving path: `giver` hands a partition of `topic` to `receiver`.
#[derive(Clone, Copy)]
struct Hop {
    giver: usize,
    topic: usize,
    receiver: usize,
}

/// The target being built, with what is needed to keep improving it.
struct Group<'a> {
    /// Topics that exist and have a subscriber.
    topics: Vec<Topic<'a>>,
    /// One entry per member id, by id, so that the result does not depend on input order.
    members: Vec<Member<'a>>,
    owner: BTreeMap<Partition, usize>,
}

impl<'a> Group<'a> {
    /// Starts from the owners that still subscribe keeping their partitions, and every other
    /// partition on its least loaded subscriber.
    fn new(input: &'a [MemberSubscription], partitions: &'a BTreeMap<String, i32>) -> Self {
        let mut by_id: BTreeMap<&str, &MemberSubscription> = BTreeMap::new();
        for member in input {
            by_id.entry(member.member_id.as_str()).or_insert(member);
        }
        let subscriptions: Vec<(&MemberSubscription, BTreeSet<&str>)> = by_id
            .into_values()
            .map(|m| (m, m.topics.iter().map(String::as_str).collect()))
            .collect();
        let topics: Vec<Topic<'a>> = partitions
            .iter()
            .filter(|(_, count)| **count > 0)
            .filter_map(|(name, &count)| {
                let subscribers: Vec<usize> = (0..subscriptions.len())
                    .filter(|&m| subscriptions[m].1.contains(name.as_str()))
                    .collect();
                (!subscribers.is_empty()).then_some(Topic {
                    name,
                    count,
                    subscribers,
                })
            })
            .collect();
        let topic_index: BTreeMap<&str, usize> = topics
            .iter()
            .enumerate()
            .map(|(t, topic)| (topic.name, t))
            .collect();

        // The best claim so far per partition: (generation, claimant subscribed, member).
        // Members come by id, so a later claimant replaces an earlier one only if it is better.
        let mut claims: BTreeMap<Partition, (i32, bool, usize)> = BTreeMap::new();
        for (m, (member, subscribed)) in subscriptions.iter().enumerate() {
            let generation = claim_generation(member);
            for (topic, numbers) in &member.owned {
                let Some(&t) = topic_index.get(topic.as_str()) else {
                    continue;
                };
                let claim = (generation, subscribed.contains(topic.as_str()), m);
                for &p in numbers {
                    if !(0..topics[t].count).contains(&p) {
                        continue;
                    }
                    let best = claims.entry((t, p)).or_insert(claim);
                    if (claim.0, claim.1) > (best.0, best.1) {
                        *best = claim;
                    }
                }
            }
        }
        let owner = claims.into_iter().map(|(p, (_, _, m))| (p, m)).collect();

        let members = subscriptions
            .iter()
            .map(|(member, _)| Member {
                id: &member.member_id,
                load: 0,
                holds: BTreeMap::new(),
            })
            .collect();
        let mut group = Group {
            topics,
            members,
            owner,
        };

        let mut unowned = Vec::new();
        for t in 0..group.topics.len() {
            for p in 0..group.topics[t].count {
                match group.owner.get(&(t, p)) {
                    Some(&m) if group.topics[t].subscribers.binary_search(&m).is_ok() => {
                        group.give(m, (t, p));
                    }
                    _ => unowned.push((t, p)),
                }
            }
        }
        for (t, p) in unowned {
            let lightest = group.topics[t]
                .subscribers
                .iter()
                .copied()
                .min_by_key(|&m| (group.members[m].load, m));
            if let Some(m) = lightest {
                group.give(m, (t, p));
            }
        }
        group
    }

    fn give(&mut self, member: usize, (t, p): Partition) {
        let owned = self.owner.get(&(t, p)) == Some(&member);
        let member = &mut self.members[member];
        let holding = member.holds.entry(t).or_default();
        if owned {
            holding.kept.insert(p);
        } else {
            holding.taken.insert(p);
        }
        member.load += 1;
    }

    /// Removes one of `member`'s partitions of topic `t`, one it does not own if it can.
    fn take(&mut self, member: usize, t: usize) -> Option<i32> {
        let member = &mut self.members[member];
        let holding = member.holds.get_mut(&t)?;
        let p = holding
            .taken
            .pop_last()
            .or_else(|| holding.kept.pop_last())?;
        if holding.taken.is_empty() && holding.kept.is_empty() {
            member.holds.remove(&t);
        }
        member.load -= 1;
        Some(p)
    }

    /// Shifts partitions along improving paths until none is left: first over partitions
    /// nobody owns, which reaches the best balance possible without revoking anything, then
    /// over owned ones too. Every shift lowers the sum of squared loads, so both loops end.
    fn balance(&mut self) {
        while self.improve(true) {}
        while self.improve(false) {}
    }

    /// Finds one improving path, most loaded member first, and shifts along it.
    fn improve(&mut self, free_only: bool) -> bool {
        let Some(lightest) = self.members.iter().map(|m| m.load).min() else {
            return false;
        };
        let mut sources: Vec<usize> = (0..self.members.len()).collect();
        sources.sort_by_key(|&m| (Reverse(self.members[m].load), m));
        for source in sources {
            if self.members[source].load < lightest + 2 {
                break;
            }
            if let Some(path) = self.improving_path(source, free_only) {
                return self.shift(&path);
            }
        }
        false
    }

    /// The improving path from `source` that moves the fewest owned partitions, to the least
    /// loaded member among those; `None` if there is none (or only over owned partitions when
    /// `free_only`).
    ///
    /// A breadth-first search where a hop costs 1 if the giver has only owned partitions of
    /// that topic to give, else 0 (a deque search: 0-cost hops go to the front). A topic's
    /// subscribers are only visited again when it is reached more cheaply: without that, a
    /// large group with one subscription would cost members² × topics per search.
    fn improving_path(&self, source: usize, free_only: bool) -> Option<Vec<Hop>> {
        let n = self.members.len();
        let mut cost = vec![usize::MAX; n];
        let mut via: Vec<Option<(usize, usize)>> = vec![None; n];
        let mut settled = vec![false; n];
        let mut topic_cost = vec![usize::MAX; self.topics.len()];
        let mut queue = VecDeque::from([source]);
        cost[source] = 0;
        while let Some(w) = queue.pop_front() {
            if std::mem::replace(&mut settled[w], true) {
                continue;
            }
            for (&t, holding) in &self.members[w].holds {
                let step = if !holding.taken.is_empty() {
                    0
                } else if !free_only && !holding.kept.is_empty() {
                    1
                } else {
                    continue;
                };
                let through = cost[w] + step;
                if through >= topic_cost[t] {
                    continue;
                }
                topic_cost[t] = through;
                for &v in &self.topics[t].subscribers {
                    if through < cost[v] {
                        cost[v] = through;
                        via[v] = Some((w, t));
                        if step == 0 {
                            queue.push_front(v);
                        } else {
                            queue.push_back(v);
                        }
                    }
                }
            }
        }
        let limit = self.members[source].load.checked_sub(2)?;
        let target = (0..n)
            .filter(|&v| v != source && cost[v] != usize::MAX && self.members[v].load <= limit)
            .min_by_key(|&v| (cost[v], self.members[v].load, v))?;
        let mut hops = Vec::new();
        let mut receiver = target;
        while receiver != source {
            // The search tree has no cycle; the bound only keeps a bug from looping forever.
            if hops.len() > n {
                return None;
            }
            let (giver, topic) = via[receiver]?;
            hops.push(Hop {
                giver,
                topic,
                receiver,
            });
            receiver = giver;
        }
        hops.reverse();
        Some(hops)
    }

    /// Hands one partition along each hop, from the source on; each middle member gives one
    /// and gets one, so only the two ends change load.
    fn shift(&mut self, path: &[Hop]) -> bool {
        for hop in path {
            let Some(p) = self.take(hop.giver, hop.topic) else {
                return false;
            };
            self.give(hop.receiver, (hop.topic, p));
        }
        !path.is_empty()
    }

    /// The cooperative plan: the target without the partitions that change owner.
    fn plan(&self, input: &[MemberSubscription]) -> Plan {
        let mut plan = PlanBuilder::new(input);
        for member in &self.members {
            for (&t, holding) in &member.holds {
                let name = self.topics[t].name;
                for &p in &holding.kept {
                    plan.give(member.id, name, p);
                }
                for &p in holding
                    .taken
                    .iter()
                    .filter(|&&p| !self.owner.contains_key(&(t, p)))
                {
                    plan.give(member.id, name, p);
                }
            }
        }
        plan.finish()
    }

    /// The target itself, partitions that change owner included.
    #[cfg(test)]
    fn target(&self, input: &[MemberSubscription]) -> Plan {
        let mut plan = PlanBuilder::new(input);
        for member in &self.members {
            for (&t, holding) in &member.holds {
                for &p in holding.kept.iter().chain(&holding.taken) {
                    plan.give(member.id, self.topics[t].name, p);
                }
            }
        }
        plan.finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use bytes::Bytes;

    use super::{CooperativeStickyAssignor, Group};
    use crate::client::consumer::group::assignor::test_support::{
        check_plan, loads, member, random_group, random_topics, share, subscribes, topics,
    };
    use crate::client::consumer::group::assignor::{Assignor, Plan};
    use crate::client::consumer::group::protocol::MemberSubscription;

    fn assign(members: &[MemberSubscription], partitions: &BTreeMap<String, i32>) -> Plan {
        CooperativeStickyAssignor.assign(members, partitions)
    }

    fn owning(
        mut member: MemberSubscription,
        generation: i32,
        owned: &[(&str, &[i32])],
    ) -> MemberSubscription {
        member.generation = generation;
        member.owned = share(owned);
        member
    }

    /// Every member's `owned` becomes its share of `plan`, at `generation`.
    fn apply(members: &mut [MemberSubscription], plan: &Plan, generation: i32) {
        for member in members {
            member.owned = plan[&member.member_id].clone();
            member.generation = generation;
        }
    }

    fn partition_set(share: &[(String, Vec<i32>)]) -> BTreeSet<(String, i32)> {
        share
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect()
    }

    /// Balance as the target promises it: nobody holds a partition that a subscriber with at
    /// least two fewer partitions could take (so identical subscriptions end within one).
    fn assert_balanced(
        plan: &Plan,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) {
        let loads = loads(plan);
        for (id, share) in plan {
            for (topic, _) in share {
                for other in members.iter().filter(|m| subscribes(m, topic)) {
                    assert!(
                        loads[id.as_str()] <= loads[other.member_id.as_str()] + 1,
                        "{id} could hand {topic} to {}: {loads:?} {partitions:?}",
                        other.member_id
                    );
                }
            }
        }
        if members.windows(2).all(|w| w[0].topics == w[1].topics) {
            let (min, max) = (loads.values().min(), loads.values().max());
            assert!(
                max.zip(min).is_some_and(|(max, min)| max - min <= 1),
                "{loads:?}"
            );
        }
    }

    #[test]
    fn fresh_group() {
        let members = [
            member("c", &["t"]),
            member("a", &["t"]),
            member("b", &["t"]),
        ];
        let plan = assign(&members, &topics(&[("t", 6)]));
        assert_eq!(plan["a"], share(&[("t", &[0, 3])]));
        assert_eq!(plan["b"], share(&[("t", &[1, 4])]));
        assert_eq!(plan["c"], share(&[("t", &[2, 5])]));
    }

    #[test]
    fn joining_member_takes_two_rounds() {
        let partitions = topics(&[("t", 6)]);
        let mut members = vec![
            owning(member("a", &["t"]), 1, &[("t", &[0, 1, 2])]),
            owning(member("b", &["t"]), 1, &[("t", &[3, 4, 5])]),
            member("c", &["t"]),
        ];
        let round1 = assign(&members, &partitions);
        // a and b each give one up; c gets nothing until they have revoked them.
        assert_eq!(round1["a"], share(&[("t", &[0, 1])]));
        assert_eq!(round1["b"], share(&[("t", &[3, 4])]));
        assert_eq!(round1["c"], share(&[]));
        apply(&mut members, &round1, 2);
        let round2 = assign(&members, &partitions);
        assert_eq!(round2["a"], share(&[("t", &[0, 1])]));
        assert_eq!(round2["b"], share(&[("t", &[3, 4])]));
        assert_eq!(round2["c"], share(&[("t", &[2, 5])]));
    }

    #[test]
    fn leaving_member_partitions_go_at_once() {
        let partitions = topics(&[("t", 6)]);
        let members = [
            owning(member("a", &["t"]), 4, &[("t", &[0, 1])]),
            owning(member("c", &["t"]), 4, &[("t", &[4, 5])]),
        ];
        let plan = assign(&members, &partitions);
        assert_eq!(plan["a"], share(&[("t", &[0, 1, 2])]));
        assert_eq!(plan["c"], share(&[("t", &[3, 4, 5])]));
    }

    #[test]
    fn newer_generation_wins() {
        let partitions = topics(&[("t", 2)]);
        let stale = owning(member("a", &["t"]), 3, &[("t", &[0, 1])]);
        let fresh = owning(member("b", &["t"]), 4, &[("t", &[0])]);
        let plan = assign(&[stale, fresh], &partitions);
        assert_eq!(plan["a"], share(&[("t", &[1])]));
        assert_eq!(plan["b"], share(&[("t", &[0])]));

        let stale = owning(member("b", &["t"]), 3, &[("t", &[0])]);
        let fresh = owning(member("a", &["t"]), 4, &[("t", &[0, 1])]);
        let plan = assign(&[stale, fresh], &partitions);
        // a keeps one of the two; the other goes to b only once a has revoked it.
        assert_eq!(plan["a"], share(&[("t", &[0])]));
        assert_eq!(plan["b"], share(&[]));
    }

    #[test]
    fn same_generation_claims_go_to_one() {
        let partitions = topics(&[("t", 2)]);
        let members = [
            owning(member("b", &["t"]), 5, &[("t", &[0, 1])]),
            owning(member("a", &["t"]), 5, &[("t", &[0, 1])]),
        ];
        let plan = assign(&members, &partitions);
        // a (the smaller id) owns both; b must wait for a to revoke the one it will get.
        assert_eq!(plan["a"], share(&[("t", &[0])]));
        assert_eq!(plan["b"], share(&[]));
        // A claimant still subscribed beats one that is not.
        let members = [
            owning(member("a", &["u"]), 5, &[("t", &[0, 1])]),
            owning(member("b", &["t"]), 5, &[("t", &[0, 1])]),
        ];
        let plan = assign(&members, &topics(&[("t", 2), ("u", 1)]));
        assert_eq!(plan["a"], share(&[("u", &[0])]));
        assert_eq!(plan["b"], share(&[("t", &[0, 1])]));
    }

    #[test]
    fn unsubscribed_owner_revokes_first() {
        let partitions = topics(&[("t", 2), ("u", 1)]);
        let mut members = vec![
            owning(member("a", &["t"]), 2, &[("t", &[0]), ("u", &[0])]),
            owning(member("b", &["t", "u"]), 2, &[("t", &[1])]),
        ];
        let round1 = assign(&members, &partitions);
        assert_eq!(round1["a"], share(&[("t", &[0])]));
        assert_eq!(round1["b"], share(&[("t", &[1])]));
        apply(&mut members, &round1, 3);
        let round2 = assign(&members, &partitions);
        assert_eq!(round2["b"], share(&[("t", &[1]), ("u", &[0])]));
    }

    #[test]
    fn generation_from_older_members_user_data() {
        let partitions = topics(&[("t", 1)]);
        // Kafka's Java client before subscription v2: the generation alone.
        let mut java = owning(member("b", &["t"]), -1, &[("t", &[0])]);
        java.user_data = Some(Bytes::copy_from_slice(&7i32.to_be_bytes()));
        let newer = owning(member("a", &["t"]), 6, &[("t", &[0])]);
        let plan = assign(&[java, newer], &partitions);
        assert_eq!(plan["b"], share(&[("t", &[0])]));
        // librdkafka: its previous assignment, then the generation.
        let mut rdkafka = owning(member("b", &["t"]), -1, &[("t", &[0])]);
        let mut data = vec![0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0];
        data.extend_from_slice(&5i32.to_be_bytes());
        rdkafka.user_data = Some(data.into());
        let newer = owning(member("a", &["t"]), 6, &[("t", &[0])]);
        let plan = assign(&[rdkafka, newer], &partitions);
        assert_eq!(plan["a"], share(&[("t", &[0])]));
    }

    #[test]
    fn missing_topics_and_bad_claims_are_skipped() {
        let partitions = topics(&[("t", 2)]);
        let members = [
            owning(
                member("a", &["t", "later"]),
                1,
                &[("t", &[-1, 0, 7]), ("later", &[0]), ("gone", &[3])],
            ),
            member("b", &["later"]),
        ];
        let plan = assign(&members, &partitions);
        assert_eq!(plan["a"], share(&[("t", &[0, 1])]));
        assert_eq!(plan["b"], share(&[]));
    }

    #[test]
    fn different_subscriptions_balance_through_chains() {
        // c can only take u, which b owns; b can take t from a in exchange. Balance needs the
        // chain a -> b -> c, since a and c have no topic in common.
        let partitions = topics(&[("t", 4), ("u", 2)]);
        let mut members = vec![
            owning(member("a", &["t"]), 1, &[("t", &[0, 1, 2, 3])]),
            owning(member("b", &["t", "u"]), 1, &[("u", &[0, 1])]),
            member("c", &["u"]),
        ];
        let mut group = Group::new(&members, &partitions);
        group.balance();
        let target = group.target(&members);
        assert_balanced(&target, &members, &partitions);
        assert_eq!(target["a"], share(&[("t", &[0, 1])]));
        assert_eq!(target["b"], share(&[("t", &[2, 3])]));
        assert_eq!(target["c"], share(&[("u", &[0, 1])]));
        let round1 = assign(&members, &partitions);
        assert_eq!(round1["a"], share(&[("t", &[0, 1])]));
        assert!(round1["b"].is_empty() && round1["c"].is_empty());
        apply(&mut members, &round1, 2);
        assert_eq!(assign(&members, &partitions), target);
    }

    /// Random claims: overlapping, stale, out of range, on topics that do not exist.
    fn random_claims(rng: &mut fastrand::Rng, members: &mut [MemberSubscription]) {
        let mut names: Vec<String> = members.iter().flat_map(|m| m.topics.clone()).collect();
        names.push("gone".to_owned());
        for member in members {
            if rng.bool() {
                continue;
            }
            member.generation = rng.i32(-1..=3);
            member.owned.clear();
            for topic in &names {
                if rng.bool() {
                    let numbers = (0..rng.usize(0..6)).map(|_| rng.i32(-1..32)).collect();
                    member.owned.push((topic.clone(), numbers));
                }
            }
        }
    }

    #[test]
    fn random_groups_from_scratch() {
        let mut rng = fastrand::Rng::with_seed(13);
        for _ in 0..500 {
            let (mut members, partitions) = random_group(&mut rng);
            let plan = assign(&members, &partitions);
            check_plan(&plan, &members, &partitions, true);
            assert_balanced(&plan, &members, &partitions);
            rng.shuffle(&mut members);
            assert_eq!(assign(&members, &partitions), plan, "order-free");
        }
    }

    #[test]
    fn random_claims_are_honoured_safely() {
        let mut rng = fastrand::Rng::with_seed(14);
        for _ in 0..500 {
            let (mut members, partitions) = random_group(&mut rng);
            random_claims(&mut rng, &mut members);
            let plan = assign(&members, &partitions);
            let holder = check_plan(&plan, &members, &partitions, false);
            let mut group = Group::new(&members, &partitions);
            group.balance();
            let target = group.target(&members);
            let target_holder = check_plan(&target, &members, &partitions, true);
            assert_balanced(&target, &members, &partitions);

            let claims = |topic: &str, p: i32| -> Vec<(i32, &str)> {
                members
                    .iter()
                    .filter(|m| m.owned.iter().any(|(t, ps)| t == topic && ps.contains(&p)))
                    .map(|m| (m.generation, m.member_id.as_str()))
                    .collect()
            };
            for ((topic, p), id) in &target_holder {
                let claims = claims(topic, *p);
                let newest = claims.iter().map(|c| c.0).max();
                match holder.get(&(topic.clone(), *p)) {
                    // Given: nobody claims it, or its holder has one of the newest claims,
                    // so no other member can still be consuming it.
                    Some(given) => {
                        assert_eq!(given, id, "the plan follows the target");
                        assert!(
                            newest.is_none_or(|g| claims.contains(&(g, given.as_str()))),
                            "{topic}/{p} to {given} over {claims:?}"
                        );
                    }
                    // Held back: someone else owns it and must revoke it first.
                    None => assert!(
                        claims.iter().any(|c| Some(c.0) == newest && c.1 != id),
                        "{topic}/{p} held back from {id} without a reason: {claims:?}"
                    ),
                }
            }
        }
    }

    #[test]
    fn random_two_round_rebalances() {
        let mut rng = fastrand::Rng::with_seed(15);
        for case in 0..600 {
            let (mut members, partitions) = random_group(&mut rng);
            let plan0 = assign(&members, &partitions);
            apply(&mut members, &plan0, 1);
            let removing = members.len() > 1 && rng.bool();
            if removing {
                members.remove(rng.usize(..members.len()));
            } else {
                let mut newcomer = member("new", &[]);
                newcomer.topics = if rng.bool() {
                    members[0].topics.clone()
                } else {
                    let names: Vec<&str> = partitions.keys().map(String::as_str).collect();
                    random_topics(&mut rng, &names)
                };
                members.push(newcomer);
            }

            let round1 = assign(&members, &partitions);
            let holder1 = check_plan(&round1, &members, &partitions, false);
            for (topic, &count) in &partitions {
                if !members.iter().any(|m| subscribes(m, topic)) {
                    continue;
                }
                for p in 0..count {
                    if !holder1.contains_key(&(topic.clone(), p)) {
                        let owned = members
                            .iter()
                            .any(|m| m.owned.iter().any(|(t, ps)| t == topic && ps.contains(&p)));
                        assert!(owned, "case {case}: {topic}/{p} held back, owned by nobody");
                    }
                }
            }

            apply(&mut members, &round1, 2);
            let round2 = assign(&members, &partitions);
            check_plan(&round2, &members, &partitions, true);
            assert_balanced(&round2, &members, &partitions);
            for member in &members {
                let kept = partition_set(&round1[&member.member_id]);
                let now = partition_set(&round2[&member.member_id]);
                assert!(
                    kept.is_subset(&now),
                    "case {case}: round 2 revoked from {}",
                    member.member_id
                );
            }

            // With one subscription for all, a member keeps what it had up to its final
            // share (the floor or the ceiling of the average), and never trades a partition
            // away for another. Removing a member then moves nothing owned at all.
            if members.windows(2).all(|w| w[0].topics == w[1].topics) {
                let total: usize = partitions
                    .iter()
                    .filter(|(t, _)| subscribes(&members[0], t))
                    .map(|(_, &n)| n as usize)
                    .sum();
                let final_loads = loads(&round2);
                let floor = total / members.len();
                let ceiling = total.div_ceil(members.len());
                for member in &members {
                    let id = &member.member_id;
                    let before = plan0.get(id).map(|s| partition_set(s)).unwrap_or_default();
                    let after = partition_set(&round1[id]);
                    let lost = before.difference(&after).count();
                    let gained = after.difference(&before).count();
                    assert!(
                        lost <= before.len().saturating_sub(floor),
                        "case {case}: {id} lost {lost}"
                    );
                    assert!(
                        lost >= before.len().saturating_sub(ceiling),
                        "case {case}: {id} kept too many"
                    );
                    assert!(lost == 0 || gained == 0, "case {case}: {id} traded");
                    let share = final_loads[id.as_str()];
                    assert_eq!(
                        lost,
                        before.len().saturating_sub(share),
                        "case {case}: {id}"
                    );
                }
                if removing {
                    assert_eq!(round1, round2, "case {case}: a departure needs one round");
                }
            }
        }
    }

    #[test]
    fn large_group() {
        // 300 members, 10 topics of 100 partitions, all owned by one member: the searches
        // must stay near linear for this to take well under a second.
        let names: Vec<String> = (0..10).map(|t| format!("t{t}")).collect();
        let partitions: BTreeMap<String, i32> = names.iter().map(|t| (t.clone(), 100)).collect();
        let topic_refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut members: Vec<MemberSubscription> = (0..300)
            .map(|m| member(&format!("m{m:03}"), &topic_refs))
            .collect();
        members[0].owned = names
            .iter()
            .map(|t| (t.clone(), (0..100).collect()))
            .collect();
        members[0].generation = 1;
        let round1 = assign(&members, &partitions);
        check_plan(&round1, &members, &partitions, false);
        assert_eq!(loads(&round1)["m000"], 4, "keeps its share of 1000 / 300");
        apply(&mut members, &round1, 2);
        let round2 = assign(&members, &partitions);
        check_plan(&round2, &members, &partitions, true);
        assert_balanced(&round2, &members, &partitions);
    }
}
