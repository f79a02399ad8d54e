//! OpenID Connect against any standard provider: discovery, the authorization code flow with
//! PKCE (S256), `state` and `nonce`, the ID token checked against the provider's keys; and the
//! provider's JWT access tokens checked for `/mcp` (signature by the provider's JWKS, issuer,
//! the gateway as audience, `exp` and `nbf`, `typ: at+jwt`, RFC 9068). Both are checked only
//! with the asymmetric algorithms the provider announces: never `none`, never an HMAC keyed by
//! something a client knows. The keys are cached and read again on a key id they lack (at
//! most once a minute), and every 10 minutes.
//!
//! openidconnect's own HTTP client is off: requests go through the project's reqwest, without
//! redirects (a redirect could carry a code or a secret elsewhere) or proxies.

use std::sync::{Mutex, Once, RwLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreIdTokenClaims, CoreIdTokenVerifier, CoreJsonWebKeySet,
    CoreJwsSigningAlgorithm, CoreProviderMetadata,
};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, HttpRequest, HttpResponse,
    IssuerUrl, JsonWebTokenType, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    SignatureVerificationError, TokenResponse,
};
use serde::{Deserialize, Serialize};

use crate::GatewayError;

/// `[gateway.oidc]`: the provider people sign in to the page with, whose access tokens `/mcp`
/// accepts too.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OidcConfig {
    /// The provider's issuer URL (its discovery document is `ISSUER/.well-known/openid-configuration`).
    pub issuer: String,
    /// The gateway's client id at the provider.
    pub client_id: String,
    /// The environment variable holding the client secret (a confidential client); none: a
    /// public client (PKCE alone).
    pub client_secret_env: Option<String>,
    /// The claim that names the toolgate user (`sub`, `email`, `preferred_username`); the user
    /// must exist (`toolgate admin user add`) unless `provision` is on. Default `sub`.
    pub user_claim: Option<String>,
    /// Make the user on their first sign-in (a plain user: not an admin, in no group) instead
    /// of refusing someone nobody added. Default off. Only people `allowed_domains` and
    /// `allowed_groups` admit (when set) are made.
    pub provision: bool,
    /// With `provision`: only people whose verified `email` claim is at one of these domains.
    pub allowed_domains: Vec<String>,
    /// With `provision`: only people whose `group_claim` lists one of these groups.
    pub allowed_groups: Vec<String>,
    /// The ID token claim listing the person's groups, for `allowed_groups`; default `groups`.
    pub group_claim: Option<String>,
    /// The audience the provider puts in access tokens meant for this gateway; default: the
    /// gateway's `/mcp` URL (the RFC 8707 resource).
    pub audience: Option<String>,
    /// How far the provider's clock may be from this one, for access tokens' `exp` and `nbf`
    /// (seconds); default 60.
    pub clock_skew_secs: Option<u32>,
}

/// Who the provider signed in: the user name (`user_claim`) and what provisioning checks.
#[derive(Debug, Clone)]
pub(crate) struct SignedIn {
    pub(crate) user: String,
    email: Option<String>,
    email_verified: bool,
    groups: Vec<String>,
}

/// A JWT's payload as JSON (after its signature was checked).
fn payload_of(token: &str) -> Option<serde_json::Value> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A sign-in that has been sent to the provider and not come back yet.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) state: String,
    verifier: String,
    nonce: String,
}

/// A discovered provider.
#[derive(Debug)]
pub struct Oidc {
    config: OidcConfig,
    metadata: CoreProviderMetadata,
    secret: Option<String>,
    redirect: RedirectUrl,
    audience: String,
    /// Replaced by [`Oidc::refresh_keys`] (on an unknown key id, at most once a minute).
    jwks: RwLock<CoreJsonWebKeySet>,
    /// When the keys were last read on an unknown key id.
    refreshed: Mutex<Option<Instant>>,
    /// The signing algorithms accepted: the provider's announced asymmetric ones.
    algs: Vec<CoreJwsSigningAlgorithm>,
    http: reqwest::Client,
}

/// Tolerated clock difference with the provider, for `exp` and `nbf`, unless configured.
const SKEW_SECS: u32 = 60;
/// How often an unknown key id may make the keys be read again.
const REFRESH_EVERY: Duration = Duration::from_secs(60);

/// The asymmetric algorithms of `announced` (`none` and HMACs dropped: an HMAC would be keyed
/// by the client secret or by a key the token's sender chose); RS256 when none is left.
fn pinned_algs(announced: &[CoreJwsSigningAlgorithm]) -> Vec<CoreJwsSigningAlgorithm> {
    use CoreJwsSigningAlgorithm as A;
    let algs: Vec<_> = announced
        .iter()
        .filter(|a| !matches!(a, A::None | A::HmacSha256 | A::HmacSha384 | A::HmacSha512))
        .cloned()
        .collect();
    if algs.is_empty() { vec![A::RsaSsaPkcs1V15Sha256] } else { algs }
}

/// The `nbf` of a JWT's payload, if it has one (openidconnect does not check it).
fn not_before(token: &str) -> Result<Option<i64>, String> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).ok_or("not a JWT")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).map_err(|_| "not a JWT")?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| "not a JWT")?;
    match claims.get("nbf") {
        None => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| "its `nbf` is not a number".to_owned()),
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// An HTTP failure under openidconnect.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpFailure(String);

fn http_client() -> Result<reqwest::Client, GatewayError> {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Another part of the process may have installed one first; that one is used then.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| GatewayError::Oidc(format!("cannot set up the HTTP client: {e}")))
}

/// openidconnect's requests, sent by reqwest.
fn sender(client: &reqwest::Client) -> impl Fn(HttpRequest) -> BoxFuture<'static, Result<HttpResponse, HttpFailure>> {
    let client = client.clone();
    move |request: HttpRequest| {
        let client = client.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| HttpFailure(format!("request to the provider failed: {e}")))?;
            let status = response.status();
            let headers = response.headers().clone();
            // Discovery documents, keys and token responses are small.
            let body =
                response.bytes().await.map_err(|e| HttpFailure(format!("cannot read the provider's answer: {e}")))?;
            if body.len() > 1024 * 1024 {
                return Err(HttpFailure("the provider's answer is over 1 MiB".to_owned()));
            }
            let mut out = http::Response::new(body.to_vec());
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            Ok(out)
        })
    }
}

impl Oidc {
    /// Reads the provider's discovery document and keys. `public_url` is where the gateway is
    /// reached (`http://127.0.0.1:8765`): the redirect URI is `PUBLIC_URL/signin/callback`.
    pub async fn discover(config: &OidcConfig, public_url: &str) -> Result<Oidc, GatewayError> {
        let bad = |what: String| GatewayError::Oidc(what);
        let issuer = IssuerUrl::new(config.issuer.clone())
            .map_err(|e| bad(format!("[gateway.oidc] issuer `{}` is not a URL: {e}", config.issuer)))?;
        if config.client_id.is_empty() {
            return Err(bad("[gateway.oidc] needs client_id (the gateway's client at the provider)".to_owned()));
        }
        let secret = match &config.client_secret_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                bad(format!("[gateway.oidc] client_secret_env names `{var}`, which is not set in the environment"))
            })?),
            None => None,
        };
        let public = public_url.trim_end_matches('/');
        let redirect = RedirectUrl::new(format!("{public}/signin/callback"))
            .map_err(|e| bad(format!("the gateway's URL `{public}` is not a URL: {e}")))?;
        let http = http_client()?;
        let metadata = CoreProviderMetadata::discover_async(issuer, &sender(&http)).await.map_err(|e| {
            bad(format!(
                "cannot read the discovery document of {}: {}; check [gateway.oidc] issuer and that the provider is up",
                config.issuer,
                error_chain(&e)
            ))
        })?;
        let jwks = metadata.jwks().clone();
        let audience = config.audience.clone().unwrap_or_else(|| format!("{public}/mcp"));
        let algs = pinned_algs(metadata.id_token_signing_alg_values_supported());
        Ok(Oidc {
            config: config.clone(),
            metadata,
            secret,
            redirect,
            audience,
            jwks: RwLock::new(jwks),
            refreshed: Mutex::new(None),
            algs,
            http,
        })
    }

    /// The issuer, as configured.
    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// The audience access tokens for `/mcp` must name.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// Where to send the browser, and what to keep until it comes back.
    pub(crate) fn begin(&self) -> (String, Pending) {
        let client = CoreClient::from_provider_metadata(
            self.metadata.clone(),
            ClientId::new(self.config.client_id.clone()),
            self.secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(self.redirect.clone());
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random)
            .add_scope(Scope::new("email".to_owned()))
            .add_scope(Scope::new("profile".to_owned()))
            .set_pkce_challenge(challenge)
            .url();
        let pending = Pending {
            state: state.secret().clone(),
            verifier: verifier.secret().clone(),
            nonce: nonce.secret().clone(),
        };
        (url.to_string(), pending)
    }

    /// Exchanges `code` (with the PKCE verifier), checks the ID token (signature, issuer,
    /// audience, expiry, nonce) and returns the user it names.
    pub(crate) async fn finish(&self, pending: Pending, code: &str) -> Result<SignedIn, String> {
        let client = CoreClient::from_provider_metadata(
            self.metadata.clone(),
            ClientId::new(self.config.client_id.clone()),
            self.secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(self.redirect.clone());
        let request = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| format!("the provider publishes no token endpoint: {e}"))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier));
        let tokens = request
            .request_async(&sender(&self.http))
            .await
            .map_err(|e| format!("the provider refused the code: {}", error_chain(&e)))?;
        let id_token = tokens.id_token().ok_or("the provider sent no ID token")?;
        let verifier = client.id_token_verifier().set_allowed_algs(self.algs.clone());
        let nonce = Nonce::new(pending.nonce);
        let claims = id_token.claims(&verifier, &nonce).map_err(|e| format!("the ID token is not valid: {e}"))?;
        let user = self.user_of(claims)?;
        // The signature was checked above: the payload's other claims can be read as they are.
        let payload = payload_of(&id_token.to_string()).unwrap_or_default();
        let email = claims.email().map(|e| e.to_string());
        let group_claim = self.config.group_claim.as_deref().unwrap_or("groups");
        let groups = match payload.get(group_claim) {
            Some(serde_json::Value::Array(list)) => list.iter().filter_map(|g| g.as_str().map(str::to_owned)).collect(),
            Some(serde_json::Value::String(one)) => vec![one.clone()],
            _ => Vec::new(),
        };
        Ok(SignedIn { user, email, email_verified: claims.email_verified() == Some(true), groups })
    }

    /// Whether someone the gateway has no user for may get one now (`provision`): `Ok`, or
    /// why not (for the sign-in page).
    pub(crate) fn may_provision(&self, who: &SignedIn) -> Result<(), String> {
        let add = format!("an admin adds them with `toolgate admin user add {}`", who.user);
        if !self.config.provision {
            return Err(format!("there is no enabled user `{}` on this gateway; {add}", who.user));
        }
        if !self.config.allowed_domains.is_empty() {
            let domain = who
                .email
                .as_deref()
                .filter(|_| who.email_verified)
                .and_then(|e| e.rsplit_once('@'))
                .map(|(_, d)| d.to_ascii_lowercase());
            let allowed = domain.as_deref().is_some_and(|d| {
                self.config.allowed_domains.iter().any(|a| a.trim_start_matches('@').eq_ignore_ascii_case(d))
            });
            if !allowed {
                return Err(format!(
                    "`{}` is not at an allowed domain of this gateway (a verified email at {}); {add}",
                    who.user,
                    self.config.allowed_domains.join(", ")
                ));
            }
        }
        if !self.config.allowed_groups.is_empty() && !who.groups.iter().any(|g| self.config.allowed_groups.contains(g))
        {
            return Err(format!(
                "`{}` is in none of the groups this gateway admits ({}); {add}",
                who.user,
                self.config.allowed_groups.join(", ")
            ));
        }
        Ok(())
    }

    fn user_of(&self, claims: &CoreIdTokenClaims) -> Result<String, String> {
        let claim = self.config.user_claim.as_deref().unwrap_or("sub");
        let value = match claim {
            "sub" => Some(claims.subject().to_string()),
            "email" => claims.email().map(|e| e.to_string()),
            "preferred_username" => claims.preferred_username().map(|u| u.to_string()),
            _ => None,
        };
        value.ok_or_else(|| format!("the provider's token has no `{claim}` claim ([gateway.oidc] user_claim)"))
    }

    /// The user a provider's access token names, when it is a JWT access token (RFC 9068)
    /// signed by one of the provider's keys, issued by it, for this gateway, and not expired.
    /// A key id the cached keys lack makes them be read again (at most once a minute), here and
    /// now: the caller's thread waits up to 10 seconds for the provider.
    pub fn verify_access_token(&self, token: &str) -> Result<String, String> {
        let parsed: CoreIdToken = token.parse().map_err(|_| "not a JWT".to_owned())?;
        let skew = i64::from(self.config.clock_skew_secs.unwrap_or(SKEW_SECS));
        if let Some(nbf) = not_before(token)?
            && nbf > now_secs() + skew
        {
            return Err("the token is not valid yet (`nbf`)".to_owned());
        }
        let at_jwt = JsonWebTokenType::new("at+jwt".to_owned())
            .normalize()
            .map_err(|e| format!("cannot name the access token type: {e}"))?;
        let check = |jwks: CoreJsonWebKeySet| {
            // The audience is the gateway, so an ID token (audience: the page's client) or a
            // token for another resource does not pass; nor does one of another `typ`.
            let verifier = CoreIdTokenVerifier::new_public_client(
                ClientId::new(self.audience.clone()),
                self.metadata.issuer().clone(),
                jwks,
            )
            .set_allowed_jose_types([at_jwt.clone()])
            .set_allowed_algs(self.algs.clone())
            // `exp` with the same skew as `nbf`.
            .set_time_fn(|| chrono::DateTime::from_timestamp(now_secs() - skew, 0).unwrap_or_else(chrono::Utc::now));
            parsed.claims(&verifier, |_: Option<&Nonce>| Ok(())).map(|c| self.user_of(c))
        };
        let jwks = self.jwks.read().unwrap_or_else(|e| e.into_inner()).clone();
        match check(jwks) {
            Ok(user) => user,
            Err(ClaimsVerificationError::SignatureVerification(SignatureVerificationError::NoMatchingKey))
                if self.may_refresh() =>
            {
                // Perhaps a key the provider rotated in since the keys were read.
                if let Err(e) = self.refresh_keys_now() {
                    tracing::warn!("{e}");
                }
                let jwks = self.jwks.read().unwrap_or_else(|e| e.into_inner()).clone();
                check(jwks).map_err(|e| format!("{e}"))?
            }
            Err(e) => Err(format!("{e}")),
        }
    }

    /// Whether an unknown key id may read the keys again now (once a minute at most, so forged
    /// key ids cannot make the gateway hammer the provider).
    fn may_refresh(&self) -> bool {
        let mut last = self.refreshed.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| at.elapsed() < REFRESH_EVERY) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// [`Oidc::refresh_keys`] from synchronous code (an authenticator), on a thread of its
    /// own with its own client and runtime, bounded to 10 seconds.
    fn refresh_keys_now(&self) -> Result<(), GatewayError> {
        let uri = self.metadata.jwks_uri().clone();
        let keys = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| GatewayError::Oidc(format!("cannot start a runtime to read the keys: {e}")))?;
                    let client = http_client()?;
                    runtime.block_on(async {
                        tokio::time::timeout(
                            Duration::from_secs(10),
                            CoreJsonWebKeySet::fetch_async(&uri, &sender(&client)),
                        )
                        .await
                        .map_err(|_| GatewayError::Oidc("the provider's keys took over 10 s".to_owned()))?
                        .map_err(|e| {
                            GatewayError::Oidc(format!("cannot read the provider's keys: {}", error_chain(&e)))
                        })
                    })
                })
                .join()
                .map_err(|_| GatewayError::Oidc("reading the provider's keys failed".to_owned()))?
        })?;
        *self.jwks.write().unwrap_or_else(|e| e.into_inner()) = keys;
        Ok(())
    }

    /// Reads the provider's keys again (after a rotation).
    pub async fn refresh_keys(&self) -> Result<(), GatewayError> {
        let keys = CoreJsonWebKeySet::fetch_async(self.metadata.jwks_uri(), &sender(&self.http))
            .await
            .map_err(|e| GatewayError::Oidc(format!("cannot read the provider's keys: {}", error_chain(&e))))?;
        *self.jwks.write().unwrap_or_else(|e| e.into_inner()) = keys;
        Ok(())
    }
}

/// An error and its sources, on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_asymmetric_algorithms_are_accepted() {
        use CoreJwsSigningAlgorithm as A;
        let announced = [A::None, A::HmacSha256, A::RsaSsaPkcs1V15Sha256, A::EcdsaP256Sha256, A::HmacSha512];
        assert_eq!(pinned_algs(&announced), vec![A::RsaSsaPkcs1V15Sha256, A::EcdsaP256Sha256]);
        assert_eq!(pinned_algs(&[A::None, A::HmacSha256]), vec![A::RsaSsaPkcs1V15Sha256], "never `none` or an HMAC");
    }

    #[test]
    fn not_before_is_read_from_the_payload() {
        use base64::Engine as _;
        let jwt = |payload: &str| {
            let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
            format!("{}.{}.sig", b64.encode(r#"{"alg":"RS256"}"#), b64.encode(payload))
        };
        assert_eq!(not_before(&jwt(r#"{"nbf":1700000000}"#)).unwrap(), Some(1_700_000_000));
        assert_eq!(not_before(&jwt(r#"{"sub":"a"}"#)).unwrap(), None);
        assert!(not_before(&jwt(r#"{"nbf":"soon"}"#)).is_err());
        assert!(not_before("no-dots").is_err() && not_before("a.!!!.c").is_err());
    }
}
