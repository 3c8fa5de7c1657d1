//! Consumer groups: what members exchange through the group coordinator.
//!
//! [`protocol`] encodes and decodes the classic `consumer` protocol's subscription and
//! assignment bytes; [`assignor`] turns the members' subscriptions into the leader's plan.

// Nothing drives these yet outside their tests: the group consumer that will comes next. The
// expectation fails the build once it does, so that this line goes with it.
#![cfg_attr(
    not(test),
    expect(dead_code, reason = "used by the group consumer, not written yet")
)]

pub mod assignor;
pub mod protocol;
