//! The shared credentials and config files (`~/.aws/credentials`, `~/.aws/config`): INI
//! sections of `key = value` lines. The credentials file names a profile `[name]`, the config
//! file `[profile name]` (`[default]` in both); the credentials file wins where both hold a key.

/// The `key = value` pairs of section `section` in `text` (keys in lower case).
fn section(text: &str, wanted: &str) -> Option<Vec<(String, String)>> {
    let mut found = None;
    let mut current: Option<bool> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let matches = name.trim() == wanted;
            if matches && found.is_none() {
                found = Some(Vec::new());
            }
            current = Some(matches);
            continue;
        }
        if current == Some(true)
            && let Some((key, value)) = line.split_once('=')
            && let Some(entries) = found.as_mut()
        {
            entries.push((key.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    found
}

/// The settings of `profile`: the config file's `[profile NAME]` (`[default]` for the
/// default profile) overlaid by the credentials file's `[NAME]`.
pub(crate) fn settings(
    profile: &str,
    credentials: Option<&str>,
    config: Option<&str>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(config) = config {
        let mut entries = section(config, &format!("profile {profile}"));
        if entries.is_none() && profile == "default" {
            entries = section(config, "default");
        }
        out.extend(entries.unwrap_or_default());
    }
    if let Some(credentials) = credentials {
        for (key, value) in section(credentials, profile).unwrap_or_default() {
            out.retain(|(k, _)| *k != key);
            out.push((key, value));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msk_iam_profiles_merge_credentials_over_config() {
        let credentials = "[default]\naws_access_key_id = AKID1\n\n[work]\n# a comment\naws_access_key_id=AKID2\naws_secret_access_key = s2 \n";
        let config = "[default]\nregion=eu-west-1\n[profile work]\naws_access_key_id = OLD\nregion = us-east-2\n[work]\nregion=wrong\n";
        let work = settings("work", Some(credentials), Some(config));
        let get = |k: &str| {
            work.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("aws_access_key_id"), Some("AKID2"));
        assert_eq!(get("aws_secret_access_key"), Some("s2"));
        assert_eq!(get("region"), Some("us-east-2"));
        let default = settings("default", None, Some(config));
        assert_eq!(default, vec![("region".to_owned(), "eu-west-1".to_owned())]);
        assert!(settings("missing", Some(credentials), Some(config)).is_empty());
    }
}
