//! The credential chain: the environment, the profile files, web identity, `IMDSv2`, in the
//! order the AWS SDKs try them. The first source that is configured answers; a source that is
//! configured but fails (a profile without its secret, an STS refusal) is an error, not a
//! reason to try the next, so that a typo never silently picks another identity.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio::sync::Mutex;

use super::http;
use super::json::{field, parse_flat_object};
use super::sigv4::uri_encode;
use super::time::parse_iso8601;
use super::{AwsCredentials, AwsCredentialsFuture, AwsCredentialsProvider, Environment};
use crate::client::security::Secret;

/// How long before their expiry credentials are replaced (the SDKs' five minutes).
const REFRESH_MARGIN: Duration = Duration::from_mins(5);
/// IMDS answers from the host itself; off EC2 it does not answer at all.
const IMDS_DEADLINE: Duration = Duration::from_secs(2);
const STS_DEADLINE: Duration = Duration::from_secs(10);
/// The largest profile file or web identity token read.
const MAX_FILE: u64 = 1024 * 1024;

/// AWS credentials found as the AWS SDKs find them, in this order:
///
/// 1. the environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`;
/// 2. the profile `AWS_PROFILE` (else `default`) of the shared credentials file
///    (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`) and config file
///    (`AWS_CONFIG_FILE`, else `~/.aws/config`): `aws_access_key_id`,
///    `aws_secret_access_key`, `aws_session_token` (profiles that assume roles or run a
///    `credential_process` are not read);
/// 3. web identity: the token of `AWS_WEB_IDENTITY_TOKEN_FILE` exchanged for `AWS_ROLE_ARN`'s
///    credentials with STS `AssumeRoleWithWebIdentity` (`AWS_ROLE_SESSION_NAME`; the endpoint
///    is `AWS_ENDPOINT_URL_STS`, else the region's STS; HTTPS needs the `ssl` feature);
/// 4. EC2's instance metadata service, `IMDSv2` (a session token, then the instance role's
///    credentials; `AWS_EC2_METADATA_SERVICE_ENDPOINT` moves it,
///    `AWS_EC2_METADATA_DISABLED=true` skips it).
///
/// Temporary credentials are kept until five minutes (see
/// [`with_refresh_margin`](Self::with_refresh_margin)) before they expire, then looked up
/// again; concurrent authentications share one lookup.
pub struct AwsCredentialChain {
    environment: Environment,
    margin: Duration,
    cached: Mutex<Option<AwsCredentials>>,
}

impl std::fmt::Debug for AwsCredentialChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentialChain")
            .field("environment", &self.environment)
            .field("margin", &self.margin)
            .finish_non_exhaustive()
    }
}

impl AwsCredentialChain {
    /// The chain over this process's environment, read now.
    #[must_use]
    pub fn from_environment() -> Self {
        Self::over(Environment::process())
    }

    /// The chain over the given variables instead of the process's (for a service that keeps
    /// several identities, or a test).
    #[must_use]
    pub fn with_variables<K: Into<String>, V: Into<String>>(
        variables: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self::over(Environment(
            variables
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        ))
    }

    fn over(environment: Environment) -> Self {
        AwsCredentialChain {
            environment,
            margin: REFRESH_MARGIN,
            cached: Mutex::new(None),
        }
    }

    /// Replaces credentials once less than `margin` of their validity remains (default five
    /// minutes).
    #[must_use]
    pub fn with_refresh_margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// Credentials valid for at least the refresh margin: the ones kept, or new ones.
    ///
    /// # Errors
    ///
    /// Why no source gave credentials, each source's reason in turn.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a lookup cut short keeps nothing, and the next call starts again.
    pub async fn resolve(&self) -> Result<AwsCredentials, String> {
        let mut cached = self.cached.lock().await;
        let now = SystemTime::now();
        if let Some(credentials) = cached.as_ref()
            && credentials.fresh_for(self.margin, now)
        {
            return Ok(credentials.clone());
        }
        match self.look_up().await {
            Ok(fresh) => {
                *cached = Some(fresh.clone());
                Ok(fresh)
            }
            // Credentials in their last minutes still beat none.
            Err(e) => match cached.as_ref() {
                Some(old) if old.fresh_for(Duration::ZERO, SystemTime::now()) => {
                    tracing::warn!(error = %e, "refreshing AWS credentials failed; the current ones are kept until they expire");
                    Ok(old.clone())
                }
                _ => Err(e),
            },
        }
    }

    async fn look_up(&self) -> Result<AwsCredentials, String> {
        let env = &self.environment;
        let mut skipped = Vec::new();
        match from_variables(env)? {
            Some(credentials) => return Ok(credentials),
            None => skipped.push("environment: AWS_ACCESS_KEY_ID is not set".to_owned()),
        }
        match from_profile(env).await? {
            Ok(credentials) => return Ok(credentials),
            Err(why) => skipped.push(why),
        }
        if let Some(credentials) = web_identity(env).await? {
            return Ok(credentials);
        }
        skipped.push("web identity: AWS_WEB_IDENTITY_TOKEN_FILE is not set".to_owned());
        if env
            .get("AWS_EC2_METADATA_DISABLED")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            skipped.push("IMDS: AWS_EC2_METADATA_DISABLED=true".to_owned());
        } else {
            match imds(env).await {
                Ok(credentials) => return Ok(credentials),
                Err(why) => skipped.push(format!("IMDS: {why}")),
            }
        }
        Err(format!("no AWS credentials found ({})", skipped.join("; ")))
    }
}

impl AwsCredentialsProvider for AwsCredentialChain {
    fn credentials(&self) -> AwsCredentialsFuture<'_> {
        Box::pin(self.resolve())
    }

    fn region(&self) -> Option<String> {
        self.environment
            .get("AWS_REGION")
            .or_else(|| self.environment.get("AWS_DEFAULT_REGION"))
            .map(str::to_owned)
    }
}

fn pair(
    key: Option<&str>,
    secret: Option<&str>,
    token: Option<&str>,
    origin: &str,
) -> Result<Option<AwsCredentials>, String> {
    match (key, secret) {
        (None, _) => Ok(None),
        (Some(_), None) => Err(format!(
            "{origin} has an access key id but no secret access key"
        )),
        (Some(key), Some(secret)) => Ok(Some(AwsCredentials {
            access_key_id: key.to_owned(),
            secret_access_key: Secret::new(secret),
            session_token: token.filter(|t| !t.is_empty()).map(Secret::new),
            expires: None,
        })),
    }
}

fn from_variables(env: &Environment) -> Result<Option<AwsCredentials>, String> {
    pair(
        env.get("AWS_ACCESS_KEY_ID"),
        env.get("AWS_SECRET_ACCESS_KEY"),
        env.get("AWS_SESSION_TOKEN"),
        "the environment",
    )
}

/// Reads a file of at most [`MAX_FILE`] bytes on tokio's blocking pool; `Ok(None)` when it
/// does not exist.
async fn read_file(path: PathBuf) -> Result<Option<String>, String> {
    let shown = path.display().to_string();
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Option<String>> {
        use std::io::Read as _;
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut text = String::new();
        file.take(MAX_FILE + 1).read_to_string(&mut text)?;
        Ok(Some(text))
    })
    .await
    .map_err(|e| format!("reading {shown}: {e}"))?
    .map_err(|e| format!("reading {shown}: {e}"))?;
    if read.as_ref().is_some_and(|t| t.len() as u64 > MAX_FILE) {
        return Err(format!("{shown} is larger than {MAX_FILE} bytes"));
    }
    Ok(read)
}

fn home_file(env: &Environment, variable: &str, name: &str) -> Option<PathBuf> {
    env.get(variable).map(PathBuf::from).or_else(|| {
        env.get("HOME")
            .map(|home| PathBuf::from(home).join(".aws").join(name))
    })
}

/// The profile's credentials; the inner `Err` says why the profile gave none.
async fn from_profile(env: &Environment) -> Result<Result<AwsCredentials, String>, String> {
    let profile = env.get("AWS_PROFILE").unwrap_or("default");
    let credentials_path = home_file(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config_path = home_file(env, "AWS_CONFIG_FILE", "config");
    let credentials = match credentials_path.clone() {
        Some(path) => read_file(path).await?,
        None => None,
    };
    let config = match config_path.clone() {
        Some(path) => read_file(path).await?,
        None => None,
    };
    let settings = super::profile::settings(profile, credentials.as_deref(), config.as_deref());
    let get = |key: &str| field(&settings, key).filter(|v| !v.is_empty());
    let origin = format!("profile `{profile}`");
    let found = pair(
        get("aws_access_key_id"),
        get("aws_secret_access_key"),
        get("aws_session_token"),
        &origin,
    )?;
    if let Some(credentials) = found {
        return Ok(Ok(credentials));
    }
    let files: Vec<String> = [credentials_path, config_path]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect();
    Ok(Err(format!(
        "{origin}: no aws_access_key_id in {}",
        files.join(" or ")
    )))
}

/// Web identity, when `AWS_WEB_IDENTITY_TOKEN_FILE` is set.
async fn web_identity(env: &Environment) -> Result<Option<AwsCredentials>, String> {
    let Some(token_file) = env.get("AWS_WEB_IDENTITY_TOKEN_FILE") else {
        return Ok(None);
    };
    let role = env
        .get("AWS_ROLE_ARN")
        .ok_or("web identity: AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not")?;
    let token = read_file(PathBuf::from(token_file))
        .await?
        .ok_or_else(|| format!("web identity: {token_file} does not exist"))?;
    let session = env.get("AWS_ROLE_SESSION_NAME").map_or_else(
        || {
            let millis = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            format!("ruststream-kafka-{millis}")
        },
        str::to_owned,
    );
    let endpoint = match env.get("AWS_ENDPOINT_URL_STS") {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => match env
            .get("AWS_REGION")
            .or_else(|| env.get("AWS_DEFAULT_REGION"))
        {
            Some(region) => format!("https://sts.{region}.amazonaws.com"),
            None => "https://sts.amazonaws.com".to_owned(),
        },
    };
    let mut body = String::from("Action=AssumeRoleWithWebIdentity&Version=2011-06-15");
    for (name, value) in [
        ("RoleArn", role),
        ("RoleSessionName", session.as_str()),
        ("WebIdentityToken", token.trim()),
    ] {
        body.push('&');
        body.push_str(name);
        body.push('=');
        uri_encode(value, &mut body);
    }
    let answer = http::exchange(
        "POST",
        &format!("{endpoint}/"),
        &[("Content-Type", "application/x-www-form-urlencoded")],
        body.as_bytes(),
        STS_DEADLINE,
    )
    .await
    .map_err(|e| format!("web identity: STS: {e}"))?;
    let xml = String::from_utf8(answer.body)
        .map_err(|_| "web identity: STS answered bytes that are not UTF-8")?;
    if answer.status != 200 {
        let code = xml_text(&xml, "Code").unwrap_or_default();
        let message = xml_text(&xml, "Message").unwrap_or_default();
        return Err(format!(
            "web identity: STS refused AssumeRoleWithWebIdentity for {role} (HTTP {}): {code} {message}",
            answer.status
        ));
    }
    let get = |tag: &str| {
        xml_text(&xml, tag).ok_or_else(|| format!("web identity: STS's answer has no <{tag}>"))
    };
    let expiration = get("Expiration")?;
    Ok(Some(AwsCredentials {
        access_key_id: get("AccessKeyId")?,
        secret_access_key: Secret::new(get("SecretAccessKey")?),
        session_token: Some(Secret::new(get("SessionToken")?)),
        expires: Some(
            parse_iso8601(&expiration).ok_or_else(|| {
                format!("web identity: STS's expiry `{expiration}` is not a time")
            })?,
        ),
    }))
}

/// The text of the first `<tag>...</tag>` in `xml`, entities decoded.
pub(super) fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&close)?;
    let raw = xml[start..end].trim();
    if raw.contains('<') {
        return None;
    }
    Some(
        raw.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// `IMDSv2`: a session token, the instance role's name, its credentials.
async fn imds(env: &Environment) -> Result<AwsCredentials, String> {
    let base = env
        .get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
        .unwrap_or("http://169.254.169.254")
        .trim_end_matches('/');
    let token = http::exchange(
        "PUT",
        &format!("{base}/latest/api/token"),
        &[("X-aws-ec2-metadata-token-ttl-seconds", "21600")],
        &[],
        IMDS_DEADLINE,
    )
    .await?;
    let token = ok_text(token, "the session token")?;
    let token = token.trim();
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the session token is empty or not printable".to_owned());
    }
    let headers = [("X-aws-ec2-metadata-token", token)];
    let roles_url = format!("{base}/latest/meta-data/iam/security-credentials/");
    let roles = http::exchange("GET", &roles_url, &headers, &[], IMDS_DEADLINE).await?;
    let roles = ok_text(roles, "the instance role")?;
    let role = roles.lines().next().unwrap_or_default().trim();
    if role.is_empty()
        || !role
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b))
    {
        return Err(format!("the instance role `{role}` is not a role name"));
    }
    let answer = http::exchange(
        "GET",
        &format!("{roles_url}{role}"),
        &headers,
        &[],
        IMDS_DEADLINE,
    )
    .await?;
    let answer = ok_text(answer, "the role's credentials")?;
    let members =
        parse_flat_object(answer.as_bytes()).map_err(|e| format!("the role's credentials: {e}"))?;
    let get = |key: &str| {
        field(&members, key)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the role's credentials have no {key}"))
    };
    if let Some(code) = field(&members, "Code")
        && code != "Success"
    {
        return Err(format!("the role's credentials answer with code {code}"));
    }
    let expiration = get("Expiration")?;
    Ok(AwsCredentials {
        access_key_id: get("AccessKeyId")?.to_owned(),
        secret_access_key: Secret::new(get("SecretAccessKey")?),
        session_token: Some(Secret::new(get("Token")?)),
        expires: Some(
            parse_iso8601(expiration)
                .ok_or_else(|| format!("the expiry `{expiration}` is not a time"))?,
        ),
    })
}

fn ok_text(answer: http::Response, what: &str) -> Result<String, String> {
    if answer.status != 200 {
        return Err(format!("{what}: HTTP {}", answer.status));
    }
    String::from_utf8(answer.body).map_err(|_| format!("{what}: not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msk_iam_sts_xml_is_read_by_tag() {
        let xml = "<R><Credentials><AccessKeyId>ASIA1</AccessKeyId><SessionToken> a&amp;b&lt; </SessionToken></Credentials></R>";
        assert_eq!(xml_text(xml, "AccessKeyId").as_deref(), Some("ASIA1"));
        assert_eq!(xml_text(xml, "SessionToken").as_deref(), Some("a&b<"));
        assert_eq!(xml_text(xml, "Expiration"), None);
        assert_eq!(xml_text("<A><B>x</B></A>", "A"), None);
        assert_eq!(xml_text("<A>unclosed", "A"), None);
    }

    #[tokio::test]
    async fn msk_iam_chain_reports_every_source_it_tried() {
        let chain = AwsCredentialChain::with_variables([
            ("HOME", "/nonexistent-ruststream-home"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ]);
        let error = chain.resolve().await.expect_err("nothing configured");
        assert!(error.contains("AWS_ACCESS_KEY_ID is not set"), "{error}");
        assert!(error.contains("profile `default`"), "{error}");
        assert!(error.contains("AWS_EC2_METADATA_DISABLED"), "{error}");
        let half = AwsCredentialChain::with_variables([("AWS_ACCESS_KEY_ID", "AKID")]);
        let error = half.resolve().await.expect_err("no secret");
        assert!(error.contains("no secret access key"), "{error}");
    }
}
