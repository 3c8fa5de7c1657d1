//! The API versions a broker announced, the cluster features it reported as finalized, and the
//! choice of the version to speak.

use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::VersionRange;

use crate::client::error::{Error, Result};

/// Which versions of each API one broker supports (its `ApiVersions` answer).
#[derive(Debug, Clone, Default)]
pub struct ApiVersions {
    // Indexed by API key; `None` where the broker lacks the API.
    ranges: Vec<Option<VersionRange>>,
    // Finalized feature levels (ApiVersions v3+), e.g. `transaction.version`: what the whole
    // cluster has agreed to speak, as opposed to what this one broker could.
    finalized: Vec<(String, i16)>,
}

/// Features a broker reports; more than a few dozen would be hostile, and nothing needs them.
const MAX_FEATURES: usize = 64;

impl ApiVersions {
    /// Reads a broker's `ApiVersions` response.
    #[must_use]
    pub fn from_response(response: &ApiVersionsResponse) -> Self {
        let mut ranges = Vec::new();
        for api in &response.api_keys {
            let Ok(key) = usize::try_from(api.api_key) else {
                continue;
            };
            // Keys are small (under 100 today); a hostile key cannot make us allocate much.
            if key > 1024 || api.min_version > api.max_version {
                continue;
            }
            if ranges.len() <= key {
                ranges.resize(key + 1, None);
            }
            ranges[key] = Some(VersionRange {
                min: api.min_version,
                max: api.max_version,
            });
        }
        let finalized = response
            .finalized_features
            .iter()
            .take(MAX_FEATURES)
            .map(|f| (f.name.to_string(), f.max_version_level))
            .collect();
        ApiVersions { ranges, finalized }
    }

    /// The finalized level of the cluster feature `name` (e.g. `transaction.version`), or
    /// `None` when the broker reported none (older brokers, or the feature is not enabled).
    #[must_use]
    pub fn finalized_level(&self, name: &str) -> Option<i16> {
        self.finalized
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, level)| level)
    }

    /// The broker's range for `api`, if it has the API at all.
    #[must_use]
    pub fn range(&self, api: ApiKey) -> Option<VersionRange> {
        self.ranges.get(api as usize).copied().flatten()
    }

    /// Whether the broker has the API with key `key` (Kafka's number, e.g. 68 for
    /// `ConsumerGroupHeartbeat`).
    #[must_use]
    pub fn supports(&self, key: i16) -> bool {
        usize::try_from(key)
            .ok()
            .and_then(|k| self.ranges.get(k).copied().flatten())
            .is_some()
    }

    /// The highest version both the broker and `ours` support.
    pub fn pick(&self, api: ApiKey, ours: VersionRange) -> Result<i16> {
        let theirs = self
            .range(api)
            .ok_or_else(|| Error::Unsupported(format!("{api:?}")))?;
        let both = theirs.intersect(&ours);
        if both.is_empty() {
            return Err(Error::Unsupported(format!(
                "{api:?} in a version we speak (broker {theirs}, client {ours})"
            )));
        }
        Ok(both.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    fn response(keys: &[(i16, i16, i16)]) -> ApiVersionsResponse {
        let mut r = ApiVersionsResponse::default();
        for &(k, min, max) in keys {
            r.api_keys.push(
                ApiVersion::default()
                    .with_api_key(k)
                    .with_min_version(min)
                    .with_max_version(max),
            );
        }
        r
    }

    #[test]
    fn picks_the_highest_common_version() {
        let v = ApiVersions::from_response(&response(&[(0, 3, 13), (1, 4, 17)]));
        assert_eq!(
            v.pick(ApiKey::Produce, VersionRange { min: 3, max: 11 })
                .ok(),
            Some(11)
        );
        assert_eq!(
            v.pick(ApiKey::Fetch, VersionRange { min: 4, max: 20 }).ok(),
            Some(17)
        );
        assert!(
            v.pick(ApiKey::Metadata, VersionRange { min: 0, max: 12 })
                .is_err()
        );
        assert!(
            v.pick(ApiKey::Produce, VersionRange { min: 14, max: 15 })
                .is_err()
        );
    }

    #[test]
    fn reads_finalized_feature_levels() {
        use kafka_protocol::messages::api_versions_response::FinalizedFeatureKey;
        use kafka_protocol::protocol::StrBytes;
        let mut r = response(&[(0, 3, 12)]);
        r.finalized_features.push(
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str("transaction.version"))
                .with_min_version_level(0)
                .with_max_version_level(2),
        );
        let v = ApiVersions::from_response(&r);
        assert_eq!(v.finalized_level("transaction.version"), Some(2));
        assert_eq!(v.finalized_level("group.version"), None);
    }

    #[test]
    fn ignores_hostile_keys() {
        let v = ApiVersions::from_response(&response(&[(-3, 0, 1), (30000, 0, 1), (0, 5, 1)]));
        assert!(v.range(ApiKey::Produce).is_none());
    }
}
