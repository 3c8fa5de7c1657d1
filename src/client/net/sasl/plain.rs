//! PLAIN (RFC 4616): one message, `authzid NUL authcid NUL password`, no answer to check.

/// The one client message: no authorisation identity, then the user name and the password.
pub(super) fn message(username: &str, password: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(username.len() + password.len() + 2);
    out.push(0);
    out.extend_from_slice(username.as_bytes());
    out.push(0);
    out.extend_from_slice(password.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_message_separates_with_nul_bytes() {
        assert_eq!(
            super::message("alice", "s3cret"),
            b"\0alice\0s3cret".to_vec()
        );
    }
}
