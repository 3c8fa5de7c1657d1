//! Which topics a subscription covers: a list, or a regular expression matched against the
//! cluster's topics on every metadata refresh.

use regex::Regex;

use crate::client::Client;
use crate::client::error::{Error, Result};

use super::super::Subscription;

/// A subscription, ready to match topic names.
#[derive(Debug, Clone)]
pub(crate) enum TopicMatcher {
    /// These topics, sorted.
    Topics(Vec<String>),
    /// Topics matching this expression (anchored at the start, as librdkafka's `^` is).
    Pattern(Regex, String),
}

impl TopicMatcher {
    /// Checks `subscription`: an empty list or an invalid expression is refused.
    pub(crate) fn new(subscription: Subscription) -> Result<Self> {
        match subscription {
            Subscription::Topics(topics) => {
                let mut topics = topics;
                topics.sort();
                topics.dedup();
                if topics.is_empty() || topics.iter().any(String::is_empty) {
                    return Err(Error::Config("subscription: no topic named".into()));
                }
                Ok(TopicMatcher::Topics(topics))
            }
            Subscription::Pattern(pattern) => {
                let anchored = if pattern.starts_with('^') {
                    pattern.clone()
                } else {
                    format!("^(?:{pattern})")
                };
                let regex = Regex::new(&anchored)
                    .map_err(|e| Error::Config(format!("subscription pattern `{pattern}`: {e}")))?;
                Ok(TopicMatcher::Pattern(regex, pattern))
            }
        }
    }

    /// Whether it names topics through a pattern.
    pub(crate) fn is_pattern(&self) -> bool {
        matches!(self, TopicMatcher::Pattern(..))
    }

    /// The pattern as the user gave it (KIP-848 sends it to the broker).
    pub(crate) fn pattern(&self) -> Option<&str> {
        match self {
            TopicMatcher::Pattern(_, p) => Some(p),
            TopicMatcher::Topics(_) => None,
        }
    }

    /// The topics subscribed now, sorted: for a pattern, those of the cluster that match it
    /// (internal topics never do), after a fresh look at the cluster's topic list.
    pub(crate) async fn topics(&self, client: &Client) -> Result<Vec<String>> {
        match self {
            TopicMatcher::Topics(topics) => Ok(topics.clone()),
            TopicMatcher::Pattern(regex, _) => {
                client.refresh_all_metadata().await?;
                let mut topics: Vec<String> = client.with_metadata(|m| {
                    m.topics
                        .values()
                        .filter(|t| !t.internal && t.error.is_none() && regex.is_match(&t.name))
                        .map(|t| t.name.to_string())
                        .collect()
                });
                topics.sort();
                Ok(topics)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_anchored_and_checked() {
        let m = TopicMatcher::new(Subscription::Pattern("orders-.*".into())).unwrap();
        let TopicMatcher::Pattern(re, _) = &m else {
            panic!("not a pattern")
        };
        assert!(re.is_match("orders-eu"));
        assert!(!re.is_match("old-orders-eu"));
        assert!(TopicMatcher::new(Subscription::Pattern("^(".into())).is_err());
        assert!(TopicMatcher::new(Subscription::Topics(vec![])).is_err());
    }
}
