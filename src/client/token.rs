//! OAUTHBEARER tokens for connections: a [`TokenProvider`] asks its source (a synchronous or an
//! asynchronous closure) for a token, keeps it, and asks again once 80 % of its lifetime has
//! passed, as librdkafka does.
//!
//! The invariants: the source is asked by one caller at a time (the others wait for that answer
//! instead of asking again); a token handed out is unexpired when it is handed out; a failed
//! refresh keeps the previous token while it is still valid and is retried after a backoff
//! (1 s, doubling up to 10 s, librdkafka's fixed retry interval), and without a valid token the
//! caller gets the source's error, logged, and no new request before the backoff has passed.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::client::security::OAuthToken;

/// What an asynchronous token source returns.
pub type TokenFuture = Pin<Box<dyn Future<Output = Result<OAuthToken, String>> + Send>>;

type Source = dyn Fn() -> TokenFuture + Send + Sync;

/// The first wait after a failed request to the source; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// librdkafka retries a failed refresh every 10 s.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// The share of a token's lifetime after which it is refreshed.
const REFRESH_AT: f64 = 0.8;

/// Where OAUTHBEARER tokens come from: a source asked asynchronously, its token cached and
/// refreshed before it expires. Cloning shares the cache.
///
/// ```
/// use std::time::{Duration, SystemTime};
///
/// use ruststream_kafka::client::{OAuthToken, Secret, TokenProvider};
///
/// let provider = TokenProvider::new(|| async {
///     // Ask an identity provider here; an `Err` fails the connection with its text.
///     Ok(OAuthToken {
///         value: Secret::new("eyJhbGciOi..."),
///         expires: SystemTime::now() + Duration::from_secs(3600),
///         principal: "orders-service".to_owned(),
///         extensions: Vec::new(),
///     })
/// });
/// # drop(provider);
/// ```
#[derive(Clone)]
pub struct TokenProvider {
    inner: Arc<Inner>,
}

struct Inner {
    source: Box<Source>,
    state: tokio::sync::Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    token: Option<OAuthToken>,
    /// When the cached token is due for a refresh (wall clock, as tokens' expiries are).
    refresh_at: Option<SystemTime>,
    /// No request to the source before this, after a failure.
    retry_at: Option<Instant>,
    failures: u32,
    last_error: Option<String>,
}

impl fmt::Debug for TokenProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenProvider").finish_non_exhaustive()
    }
}

impl TokenProvider {
    /// A provider asking `source` for each new token; `source` runs on the caller's runtime
    /// and must not block it (do HTTP with an async client).
    pub fn new<F, Fut>(source: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<OAuthToken, String>> + Send + 'static,
    {
        Self::boxed(Box::new(move || -> TokenFuture { Box::pin(source()) }))
    }

    /// A provider calling `source`, which answers at once (such as librdkafka's unsecured
    /// JWTs, made locally); it runs on a runtime worker, so it must not wait for I/O.
    pub fn from_fn<F>(source: F) -> Self
    where
        F: Fn() -> Result<OAuthToken, String> + Send + Sync + 'static,
    {
        Self::boxed(Box::new(move || -> TokenFuture {
            let token = source();
            Box::pin(std::future::ready(token))
        }))
    }

    /// A provider that always fails with `reason` (a configuration that cannot give tokens;
    /// the first connection reports it).
    #[must_use]
    pub fn failing(reason: impl Into<String>) -> Self {
        let reason: String = reason.into();
        Self::from_fn(move || Err(reason.clone()))
    }

    fn boxed(source: Box<Source>) -> Self {
        TokenProvider {
            inner: Arc::new(Inner {
                source,
                state: tokio::sync::Mutex::new(Cached::default()),
            }),
        }
    }

    /// A valid token: the cached one while it is not due for a refresh, else a new one from
    /// the source (or the cached one while it is still valid, if the source fails).
    ///
    /// # Errors
    ///
    /// The source's error (or its last one, during the backoff after a failure) when there is
    /// no unexpired token to fall back on.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future drops the source's pending answer and leaves the
    /// cache as it was; the next call asks again.
    pub async fn token(&self) -> Result<OAuthToken, String> {
        let mut state = self.inner.state.lock().await;
        let now = SystemTime::now();
        let valid = state.token.as_ref().filter(|t| t.expires > now).cloned();
        if let Some(token) = &valid
            && state.refresh_at.is_some_and(|at| now < at)
        {
            return Ok(token.clone());
        }
        if state.retry_at.is_some_and(|at| Instant::now() < at) {
            return match valid {
                Some(token) => Ok(token),
                None => Err(state
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "no token yet".to_owned())),
            };
        }
        let answer = (self.inner.source)().await.and_then(|t| checked(t, now));
        match answer {
            Ok(token) => {
                let life = token.expires.duration_since(now).unwrap_or_default();
                state.refresh_at = Some(now + life.mul_f64(REFRESH_AT));
                state.token = Some(token.clone());
                state.retry_at = None;
                state.failures = 0;
                state.last_error = None;
                Ok(token)
            }
            Err(error) => {
                state.failures = state.failures.saturating_add(1);
                let backoff = FIRST_BACKOFF
                    .saturating_mul(1 << state.failures.saturating_sub(1).min(4))
                    .min(MAX_BACKOFF);
                state.retry_at = Some(Instant::now() + backoff);
                state.last_error = Some(error.clone());
                if let Some(token) = valid {
                    tracing::warn!(
                        %error, retry_in = ?backoff,
                        "OAUTHBEARER token refresh failed; the current token is used until it \
                         expires"
                    );
                    return Ok(token);
                }
                tracing::error!(%error, retry_in = ?backoff, "failed to acquire an OAUTHBEARER token");
                Err(error)
            }
        }
    }
}

/// `token` if librdkafka's `rd_kafka_oauthbearer_set_token` would take it: unexpired,
/// extension keys of letters other than `auth`, values and the token of visible characters,
/// spaces, tabs, CR and LF.
fn checked(token: OAuthToken, now: SystemTime) -> Result<OAuthToken, String> {
    if token.expires <= now {
        return Err(format!(
            "Must supply an unexpired token: the token of `{}` expired {:?} ago",
            token.principal,
            now.duration_since(token.expires).unwrap_or_default()
        ));
    }
    if token.value.expose().is_empty() {
        return Err("the token is empty".to_owned());
    }
    let allowed = |c: char| matches!(c, '\x21'..='\x7e' | ' ' | '\t' | '\r' | '\n');
    if !token.value.expose().chars().all(allowed) {
        return Err(
            "the token must only consist of space, horizontal tab, CR, LF and visible \
             characters (%x21-7E)"
                .to_owned(),
        );
    }
    for (key, value) in &token.extensions {
        if key == "auth" {
            return Err(
                "Cannot explicitly set the reserved `auth` SASL/OAUTHBEARER extension key"
                    .to_owned(),
            );
        }
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphabetic()) {
            return Err(format!(
                "SASL/OAUTHBEARER extension keys must only consist of A-Z or a-z characters: \
                 `{key}`"
            ));
        }
        if !value.chars().all(allowed) {
            return Err(format!(
                "SASL/OAUTHBEARER extension values must only consist of space, horizontal \
                 tab, CR, LF, and visible characters (%x21-7E): the value of `{key}`"
            ));
        }
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::client::security::Secret;

    fn token(life: Duration, value: &str) -> OAuthToken {
        OAuthToken {
            value: Secret::new(value),
            expires: SystemTime::now() + life,
            principal: "p".to_owned(),
            extensions: Vec::new(),
        }
    }

    /// A source answering from `answers` in turn (the last one for ever), counting its calls.
    fn scripted(
        answers: Vec<Result<(Duration, &'static str), &'static str>>,
    ) -> (TokenProvider, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let provider = TokenProvider::new(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst) as usize;
            let answer = answers[n.min(answers.len() - 1)];
            async move {
                answer
                    .map(|(life, value)| token(life, value))
                    .map_err(str::to_owned)
            }
        });
        (provider, calls)
    }

    #[tokio::test]
    async fn a_token_is_kept_until_80_percent_of_its_life() {
        let (provider, calls) = scripted(vec![
            Ok((Duration::from_millis(500), "first")),
            Ok((Duration::from_mins(1), "second")),
        ]);
        assert_eq!(provider.token().await.unwrap().value.expose(), "first");
        assert_eq!(provider.token().await.unwrap().value.expose(), "first");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert_eq!(provider.token().await.unwrap().value.expose(), "second");
        assert_eq!(provider.token().await.unwrap().value.expose(), "second");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failed_refresh_keeps_the_valid_token_and_backs_off() {
        let (provider, calls) = scripted(vec![
            Ok((Duration::from_millis(400), "first")),
            Err("endpoint down"),
        ]);
        assert_eq!(provider.token().await.unwrap().value.expose(), "first");
        tokio::time::sleep(Duration::from_millis(340)).await;
        // due for a refresh, which fails: the old token, still valid, is used
        assert_eq!(provider.token().await.unwrap().value.expose(), "first");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // within the backoff the source is not asked again
        assert_eq!(provider.token().await.unwrap().value.expose(), "first");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        tokio::time::sleep(Duration::from_millis(100)).await;
        // expired now, and still within the 1 s backoff: the source's error
        assert_eq!(provider.token().await.unwrap_err(), "endpoint down");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn without_a_token_the_sources_error_is_returned() {
        let (provider, calls) = scripted(vec![Err("wrong secret")]);
        assert_eq!(provider.token().await.unwrap_err(), "wrong secret");
        assert_eq!(provider.token().await.unwrap_err(), "wrong secret");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn unusable_tokens_are_refused() {
        let expired = TokenProvider::from_fn(|| {
            let mut t = token(Duration::ZERO, "t");
            t.expires -= Duration::from_secs(1);
            Ok(t)
        });
        assert!(expired.token().await.unwrap_err().contains("unexpired"));
        let reserved = TokenProvider::from_fn(|| {
            let mut t = token(Duration::from_mins(1), "t");
            t.extensions.push(("auth".to_owned(), "x".to_owned()));
            Ok(t)
        });
        assert!(reserved.token().await.unwrap_err().contains("reserved"));
        let digits = TokenProvider::from_fn(|| {
            let mut t = token(Duration::from_mins(1), "t");
            t.extensions.push(("trace1".to_owned(), "x".to_owned()));
            Ok(t)
        });
        assert!(digits.token().await.unwrap_err().contains("A-Z"));
        let control = TokenProvider::from_fn(|| Ok(token(Duration::from_mins(1), "a\u{1}b")));
        assert!(control.token().await.is_err());
        let failing = TokenProvider::failing("bad config");
        assert_eq!(failing.token().await.unwrap_err(), "bad config");
    }
}
