//! Who may read `/metrics`: the bearer token's user, as the API server knows it (TokenReview),
//! allowed `get` on the non-resource URL `/metrics` (SubjectAccessReview). The same check
//! LVMS's metrics endpoint makes (controller-runtime's authn/authz filter), so the same
//! ClusterRole grants it (`lvms-metrics-reader`). Answers are cached briefly: a scraper
//! every 30 s costs two API requests a minute at most, not two a scrape.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

/// What a request to `/metrics` gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// No bearer token, or one the API server does not accept: 401.
    Unauthenticated(String),
    /// A known user without `get` on `/metrics`: 403.
    Forbidden(String),
}

/// The check could not be made (the API server unreachable, an answer without status): 503,
/// never a guess either way, and never cached.
#[derive(Debug, thiserror::Error)]
#[error("checking the metrics client's token with the API server: {0}")]
pub struct AuthError(String);

impl AuthError {
    pub fn new(what: impl Into<String>) -> Self {
        AuthError(what.into())
    }
}

/// The bearer token of a request head (`Authorization: Bearer <token>`, header name in any
/// case), if it has one.
pub fn bearer(head: &str) -> Option<&str> {
    head.lines().skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if !name.trim().eq_ignore_ascii_case("authorization") {
            return None;
        }
        let value = value.trim();
        let (scheme, token) = value.split_once(' ')?;
        let token = token.trim();
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
    })
}

/// The SubjectAccessReview for `user` reading `path`.
pub fn access_review(user: &UserInfo, path: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some("get".to_string()),
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// How long answers are kept, and how many.
#[derive(Debug, Clone, Copy)]
pub struct CachePolicy {
    pub allowed_ttl: Duration,
    pub denied_ttl: Duration,
    pub max_entries: usize,
}

impl Default for CachePolicy {
    fn default() -> Self {
        CachePolicy {
            allowed_ttl: Duration::from_secs(60),
            denied_ttl: Duration::from_secs(10),
            max_entries: 256,
        }
    }
}

/// Answers kept per token, bounded: a client spraying tokens costs API requests, never memory.
#[derive(Default)]
pub struct VerdictCache {
    entries: HashMap<String, (Instant, Verdict)>,
}

impl VerdictCache {
    pub fn get(&self, token: &str, now: Instant) -> Option<Verdict> {
        let (until, v) = self.entries.get(token)?;
        (now < *until).then(|| v.clone())
    }

    pub fn put(&mut self, token: &str, verdict: Verdict, now: Instant, policy: &CachePolicy) {
        let ttl = if verdict == Verdict::Allowed {
            policy.allowed_ttl
        } else {
            policy.denied_ttl
        };
        if self.entries.len() >= policy.max_entries {
            self.entries.retain(|_, (until, _)| now < *until);
            if self.entries.len() >= policy.max_entries {
                self.entries.clear();
            }
        }
        self.entries.insert(token.to_string(), (now + ttl, verdict));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The check against the API server, with its cache.
pub struct Authorizer {
    client: kube::Client,
    path: String,
    policy: CachePolicy,
    cache: Mutex<VerdictCache>,
}

impl Authorizer {
    pub fn new(client: kube::Client, path: &str) -> Self {
        Authorizer {
            client,
            path: path.to_string(),
            policy: CachePolicy::default(),
            cache: Mutex::new(VerdictCache::default()),
        }
    }

    pub async fn check(&self, token: Option<&str>) -> Result<Verdict, AuthError> {
        let Some(token) = token else {
            return Ok(Verdict::Unauthenticated(
                "no bearer token: send `Authorization: Bearer <token>` of a ServiceAccount \
                 bound to the ClusterRole lvms-metrics-reader"
                    .into(),
            ));
        };
        let now = Instant::now();
        if let Some(v) = self.cache.lock().ok().and_then(|c| c.get(token, now)) {
            return Ok(v);
        }
        let verdict = self.ask(token).await?;
        if let Ok(mut c) = self.cache.lock() {
            c.put(token, verdict.clone(), now, &self.policy);
        }
        Ok(verdict)
    }

    async fn ask(&self, token: &str) -> Result<Verdict, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AuthError(format!("TokenReview: {e}")))?;
        let status = reviewed
            .status
            .ok_or_else(|| AuthError("TokenReview answered without a status".into()))?;
        if status.authenticated != Some(true) {
            return Ok(Verdict::Unauthenticated(format!(
                "the API server does not accept this token{}",
                status.error.map(|e| format!(": {e}")).unwrap_or_default()
            )));
        }
        let user = status.user.unwrap_or_default();
        let name = user.username.clone().unwrap_or_default();
        let sar = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access_review(&user, &self.path))
            .await
            .map_err(|e| AuthError(format!("SubjectAccessReview for {name}: {e}")))?;
        let status = sar.status.ok_or_else(|| {
            AuthError(format!(
                "SubjectAccessReview for {name} answered without a status"
            ))
        })?;
        Ok(if status.allowed {
            Verdict::Allowed
        } else {
            Verdict::Forbidden(format!(
                "{name} may not get {}: bind it to the ClusterRole lvms-metrics-reader{}",
                self.path,
                status
                    .reason
                    .filter(|r| !r.is_empty())
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_token_is_read_from_the_authorization_header_only() {
        let head = "GET /metrics HTTP/1.1\r\nHost: x\r\nauthorization:  Bearer abc.def \r\n\r\n";
        assert_eq!(bearer(head), Some("abc.def"));
        let head = "GET /metrics HTTP/1.1\r\nAUTHORIZATION: bearer t\r\n";
        assert_eq!(bearer(head), Some("t"));
        // Another scheme, an empty token, no header, or the token in the request line: none.
        assert_eq!(
            bearer("GET / HTTP/1.1\r\nAuthorization: Basic dTpw\r\n"),
            None
        );
        assert_eq!(
            bearer("GET / HTTP/1.1\r\nAuthorization: Bearer  \r\n"),
            None
        );
        assert_eq!(bearer("GET / HTTP/1.1\r\nHost: x\r\n"), None);
        assert_eq!(bearer("GET /Authorization: Bearer x HTTP/1.1\r\n"), None);
    }

    #[test]
    fn the_access_review_asks_for_get_on_the_path_as_the_reviewed_user() {
        let user = UserInfo {
            username: Some("system:serviceaccount:mon:prometheus".into()),
            uid: Some("u1".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            extra: None,
        };
        let sar = access_review(&user, "/metrics");
        assert_eq!(
            sar.spec.user.as_deref(),
            Some("system:serviceaccount:mon:prometheus")
        );
        assert_eq!(sar.spec.uid.as_deref(), Some("u1"));
        assert_eq!(sar.spec.groups, user.groups);
        let nra = sar.spec.non_resource_attributes.unwrap();
        assert_eq!(
            (nra.path.as_deref(), nra.verb.as_deref()),
            (Some("/metrics"), Some("get"))
        );
        assert!(sar.spec.resource_attributes.is_none());
    }

    #[test]
    fn answers_expire_and_the_cache_stays_bounded() {
        let policy = CachePolicy {
            allowed_ttl: Duration::from_secs(60),
            denied_ttl: Duration::from_secs(10),
            max_entries: 4,
        };
        let t0 = Instant::now();
        let mut c = VerdictCache::default();
        c.put("ok", Verdict::Allowed, t0, &policy);
        c.put("no", Verdict::Forbidden("x".into()), t0, &policy);
        let later = t0 + Duration::from_secs(30);
        assert_eq!(c.get("ok", later), Some(Verdict::Allowed));
        // A denial is asked again sooner: a binding just made counts within seconds.
        assert_eq!(c.get("no", later), None);
        for i in 0..100 {
            c.put(
                &format!("spray-{i}"),
                Verdict::Unauthenticated("x".into()),
                later,
                &policy,
            );
            assert!(c.len() <= policy.max_entries);
        }
    }
}
