//! Consuming: committed offsets now; the fetcher and group membership come with issue 3.

mod offsets;

pub use offsets::{CommittedOffset, GroupMember, OffsetToCommit, Offsets};
