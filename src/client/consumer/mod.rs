//! Consuming: committed offsets now; the fetcher and group membership come with issue 3.

pub mod group;
mod offsets;

pub use offsets::{CommittedOffset, GroupMember, OffsetToCommit, Offsets};
