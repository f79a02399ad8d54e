//! `/mcp`'s authenticator in gateway mode: an API key (`tg_...`), or — when `[gateway.oidc]`
//! is configured — an access token of that provider (a JWT for this gateway), which names an
//! existing, enabled user.

use std::net::IpAddr;
use std::sync::Arc;

use toolgate_mcp::{Authenticator, Caller, Refusal};
use toolgate_store::{IdentityStore, PrincipalKind};

use crate::{KeyAuthenticator, Oidc};

/// API keys, and the OIDC provider's access tokens when one is configured.
#[derive(Debug, Clone)]
pub struct GatewayAuthenticator {
    keys: KeyAuthenticator,
    identity: Arc<dyn IdentityStore>,
    oidc: Option<Arc<Oidc>>,
}

impl GatewayAuthenticator {
    /// Keys from `identity`; provider tokens from `oidc`.
    pub fn new(identity: Arc<dyn IdentityStore>, oidc: Option<Arc<Oidc>>) -> Self {
        GatewayAuthenticator { keys: KeyAuthenticator::new(Arc::clone(&identity)), identity, oidc }
    }
}

impl Authenticator for GatewayAuthenticator {
    fn authenticate(&self, authorization: Option<&[u8]>, peer: IpAddr) -> Result<Caller, Refusal> {
        let bearer = authorization
            .and_then(|v| v.strip_prefix(b"Bearer ").or_else(|| v.strip_prefix(b"bearer ")))
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(str::trim);
        let (Some(oidc), Some(token)) = (&self.oidc, bearer) else {
            return self.keys.authenticate(authorization, peer);
        };
        if token.starts_with("tg_") {
            return self.keys.authenticate(authorization, peer);
        }
        let unauthorized = |why: String| Refusal {
            status: 401,
            message: format!(
                "the access token was refused ({why}); sign in again with {} for a token whose audience is {}, \
                 or use an API key (`toolgate admin key create --user NAME`)",
                oidc.issuer(),
                oidc.audience()
            ),
        };
        let user = oidc.verify_access_token(token).map_err(unauthorized)?;
        match self.identity.principal_get(&user) {
            Ok(Some(p)) if p.kind == PrincipalKind::User && !p.disabled => Ok(Caller::new(p.name).admin(p.admin)),
            Ok(Some(p)) if p.disabled => {
                Err(Refusal { status: 403, message: format!("user `{user}` is disabled on this gateway") })
            }
            Ok(_) => Err(Refusal {
                status: 403,
                message: format!(
                    "the provider signed `{user}` in, but this gateway has no such user; an admin adds one with \
                     `toolgate admin user add {user}`"
                ),
            }),
            Err(e) => {
                tracing::error!("cannot read a token's user: {e}");
                Err(Refusal { status: 503, message: "cannot check tokens now; retry".to_owned() })
            }
        }
    }
}
