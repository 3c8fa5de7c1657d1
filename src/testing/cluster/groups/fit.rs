//! Group answers in the shape of the version asked: what a version lacks is left out or
//! carried the way that version carries it, so every advertised version encodes (the codec
//! refuses a field set where the version has none) and reads as Kafka would answer it.

use kafka_protocol::messages::{JoinGroupResponse, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;

/// `JoinGroup`: before v7 the protocol name is a plain string (empty, not null, when no
/// protocol was chosen); before v9 a leader is never told to skip the assignment: it gets the
/// members and assigns again.
pub(super) fn join(mut answer: JoinGroupResponse, version: i16) -> JoinGroupResponse {
    if version < 7 {
        answer.protocol_type = None;
        if answer.protocol_name.is_none() {
            answer.protocol_name = Some(StrBytes::default());
        }
    }
    if version < 9 {
        answer.skip_assignment = false;
    }
    if version < 5 {
        for member in &mut answer.members {
            member.group_instance_id = None;
        }
    }
    answer
}

/// `LeaveGroup`: before v3 one member left and the answer's error code is that member's.
pub(super) fn leave(mut answer: LeaveGroupResponse, version: i16) -> LeaveGroupResponse {
    if version < 3 {
        if answer.error_code == 0 {
            answer.error_code = answer.members.first().map_or(0, |m| m.error_code);
        }
        answer.members.clear();
    }
    answer
}
