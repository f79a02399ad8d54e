//! The built-in rule set, written from the providers' public token formats.
//!
//! Conventions for patterns (ASCII byte regexes, see [`super::engine::compile`]):
//! - a token with a distinctive prefix starts with `\b` and its keyword is the prefix, matched
//!   case-sensitively; the window starts at the keyword;
//! - the secret is capture group 1 (or the first group that matched); non-capturing groups
//!   elsewhere; `%END` after a token means "not followed by another token character", which
//!   stands in for a look-ahead;
//! - rules anchored on a name (`twilio ... = value`) are case-insensitive and capture only the
//!   value.

use super::engine::{Filter, Matcher, compile};
use super::generic::Class;
use super::{LeakAction, Rule, Severity};

use LeakAction::{Block, Redact, Warn};
use Severity::{Critical, High, Low, Medium};

/// "not followed by a base64url character"
const END: &str = r"(?:[^A-Za-z0-9_-]|$)";

struct Spec {
    id: &'static str,
    description: &'static str,
    severity: Severity,
    action: LeakAction,
    keywords: &'static [&'static str],
    case_sensitive: bool,
    pattern: String,
    before: usize,
    after: usize,
    filter: Filter,
}

/// A token with a distinctive, case-sensitive prefix; the match starts at the keyword.
fn token(
    id: &'static str,
    description: &'static str,
    severity: Severity,
    keywords: &'static [&'static str],
    pattern: &str,
    after: usize,
) -> Spec {
    Spec {
        id,
        description,
        severity,
        action: Redact,
        keywords,
        case_sensitive: true,
        pattern: pattern.replace("%END", END),
        before: 0,
        after,
        filter: Filter { placeholder: true, min_entropy: 0.0, validate: None, generic: false, precheck: None },
    }
}

/// A value found after a name (`twilio_auth_token = ...`): keywords are case-insensitive and the
/// match may start before the keyword.
fn named(
    id: &'static str,
    description: &'static str,
    severity: Severity,
    keywords: &'static [&'static str],
    pattern: &str,
    before: usize,
    after: usize,
) -> Spec {
    Spec { case_sensitive: false, before, ..token(id, description, severity, keywords, pattern, after) }
}

impl Spec {
    fn action(mut self, action: LeakAction) -> Self {
        self.action = action;
        self
    }
    fn before(mut self, before: usize) -> Self {
        self.before = before;
        self
    }
    fn raw(mut self) -> Self {
        self.filter.placeholder = false;
        self
    }
    fn entropy(mut self, bits: f64) -> Self {
        self.filter.min_entropy = bits;
        self
    }
    fn validate(mut self, f: fn(&[u8]) -> bool) -> Self {
        self.filter.validate = Some(f);
        self
    }
    fn generic(mut self) -> Self {
        self.filter.generic = true;
        self
    }
    fn precheck(mut self, f: fn(&[u8], usize) -> bool) -> Self {
        self.filter.precheck = Some(f);
        self
    }
    fn build(self) -> Rule {
        let regex = compile(self.id, &self.pattern);
        Rule {
            id: self.id,
            description: self.description,
            severity: self.severity,
            action: self.action,
            keywords: self.keywords,
            case_sensitive: self.case_sensitive,
            matcher: Matcher::Regex {
                regex,
                pattern: self.pattern,
                before: self.before,
                after: self.after,
                filter: self.filter,
            },
        }
    }
}

fn assignment(id: &'static str, description: &'static str, keywords: &'static [&'static str], class: Class) -> Rule {
    Rule {
        id,
        description,
        severity: Medium,
        action: Redact,
        keywords,
        case_sensitive: false,
        matcher: Matcher::Assignment(class),
    }
}

/// After `scheme://`: a user-info with a password (`user:pw@`) before the URL ends.
fn has_userinfo(bytes: &[u8], from: usize) -> bool {
    let mut colon = false;
    for &b in bytes.iter().skip(from).take(200) {
        match b {
            b':' => colon = true,
            b'@' => return colon,
            b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>' | b'`' => return false,
            b if b.is_ascii_whitespace() => return false,
            _ => {}
        }
    }
    false
}

/// Base64 that decodes to `user:password` (Docker `auth`, HTTP Basic).
fn is_basic_credential(b64: &[u8]) -> bool {
    decode_base64(b64).is_some_and(|raw| {
        raw.iter().all(|b| b.is_ascii_graphic() || *b == b' ')
            && raw.iter().position(|&b| b == b':').is_some_and(|i| i > 0 && i + 1 < raw.len())
    })
}

fn decode_base64(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// A `data:` block of a Kubernetes Secret holds a value worth reporting: at least 12 base64
/// characters (9 bytes: longer than `admin` or `pass`, shorter than any generated password)
/// that decode.
fn has_secret_data_value(block: &[u8]) -> bool {
    block.split(|&b| b == b'\n').any(|line| {
        let Some(colon) = line.iter().position(|&b| b == b':') else { return false };
        let value = line[colon + 1..].trim_ascii();
        let value = value.strip_prefix(b"\"").or_else(|| value.strip_prefix(b"'")).unwrap_or(value);
        let value = value.strip_suffix(b"\"").or_else(|| value.strip_suffix(b"'")).unwrap_or(value);
        value.len() >= 12
            && value.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
            && decode_base64(value).is_some()
    })
}

/// Base64 of a JSON Web Token: decodes to `eyJ<header>.eyJ<payload>.`.
fn is_base64_jwt(b64: &[u8]) -> bool {
    decode_base64(b64).is_some_and(|raw| {
        let mut parts = raw.split(|&b| b == b'.');
        let ok = |p: Option<&[u8]>| p.is_some_and(|p| p.starts_with(b"eyJ") && p.len() >= 10);
        ok(parts.next()) && ok(parts.next())
    })
}

/// A URL password worth reporting: not a default, and letters mixed with digits.
fn is_strong_url_password(pw: &[u8]) -> bool {
    is_real_password(pw) && pw.iter().any(u8::is_ascii_digit) && pw.iter().any(u8::is_ascii_alphabetic)
}

/// A database URL's password is a placeholder when it equals a common default.
fn is_real_password(pw: &[u8]) -> bool {
    const DEFAULTS: &[&str] = &[
        "password",
        "pass",
        "passwd",
        "pwd",
        "secret",
        "changeme",
        "postgres",
        "root",
        "admin",
        "mysql",
        "guest",
        "user",
        "test",
        "example",
        "redis",
        "mongo",
        "mongodb",
        "rabbitmq",
        "hunter2",
        "foo",
        "bar",
        "foobar",
        "pw",
        "sa",
        "mypassword",
        "mysecretpassword",
        "p4ssw0rd",
        "s3cret",
        "opensesame",
        "qwerty",
    ];
    let lower = pw.to_ascii_lowercase();
    let has = |w: &[u8]| lower.windows(w.len()).any(|x| x == w);
    !(DEFAULTS.iter().any(|d| d.as_bytes() == lower.as_slice())
        || has(b"secret")
        || has(b"pass")
        || matches!(pw.first(), Some(b'$' | b'%' | b'{' | b'<' | b'['))
        || pw.iter().all(|&b| b == b'*' || b == b'x' || b == b'X' || b == b'.')
        || lower.starts_with(b"your")
        || lower.windows(7).any(|w| w == b"example")
        || lower.windows(11).any(|w| w == b"placeholder"))
}

const TWILIO_KEYWORDS: &[&str] =
    &["SK0", "SK1", "SK2", "SK3", "SK4", "SK5", "SK6", "SK7", "SK8", "SK9", "SKa", "SKb", "SKc", "SKd", "SKe", "SKf"];

/// The rule set. The order matters only to break ties between equal overlapping matches.
pub(crate) fn builtin() -> Vec<Rule> {
    let mut rules: Vec<Rule> = vec![Rule {
        id: "env-secret-value",
        description: "The verbatim value of one of the server's secret environment variables",
        severity: Critical,
        action: Block,
        keywords: &[],
        case_sensitive: true,
        matcher: Matcher::SecretValue,
    }];
    let specs = vec![
        // --- Private keys -------------------------------------------------------------------
        named(
            "private-key",
            "PEM private key (PKCS#1, PKCS#8, SEC1, DSA, encrypted), raw or JSON-escaped",
            Critical,
            &["PRIVATE KEY-----"],
            r"-----BEGIN (?:(?:RSA|EC|DSA|ENCRYPTED|ED25519|ED448|X25519|X448|DH|ANY|SSH2(?: ENCRYPTED)?) )?PRIVATE KEY-----(?:[A-Za-z0-9+/=\s\\:,.-]{64,}?-----END (?:(?:RSA|EC|DSA|ENCRYPTED|ED25519|ED448|X25519|X448|DH|ANY|SSH2(?: ENCRYPTED)?) )?PRIVATE KEY-----|[A-Za-z0-9+/=\r\n\\]{64,})",
            40,
            20_000,
        )
        .action(Block)
        .raw(),
        named(
            "openssh-private-key",
            "OpenSSH private key",
            Critical,
            &["BEGIN OPENSSH PRIVATE KEY"],
            r"-----BEGIN OPENSSH PRIVATE KEY-----(?:[A-Za-z0-9+/=\s\\]{64,}?-----END OPENSSH PRIVATE KEY-----|[A-Za-z0-9+/=\r\n\\]{64,})",
            8,
            20_000,
        )
        .action(Block)
        .raw(),
        named(
            "pgp-private-key-block",
            "PGP/GPG armored private key block",
            Critical,
            &["BEGIN PGP PRIVATE KEY BLOCK"],
            r"-----BEGIN PGP PRIVATE KEY BLOCK-----(?:(?s:.){64,}?-----END PGP PRIVATE KEY BLOCK-----|[A-Za-z0-9+/=:\s\\.-]{64,})",
            8,
            40_000,
        )
        .action(Block)
        .raw(),
        named(
            "putty-private-key",
            "PuTTY private key file (the private lines)",
            Critical,
            &["PuTTY-User-Key-File-"],
            r"PuTTY-User-Key-File-[23]:[^\n]*\n(?s:.){0,4000}?Private-Lines:[ \t]*\d+\r?\n([A-Za-z0-9+/=\r\n]{40,})",
            0,
            12_000,
        )
        .action(Block)
        .raw(),
        // --- Kubernetes ---------------------------------------------------------------------
        // The `data:` block of a `kind: Secret` manifest, in the order people write it (kind
        // first) and in the order `kubectl get secret -o yaml` prints it (data first): its
        // base64 values carry no name that says "secret", so the whole block is the finding.
        named(
            "kubernetes-secret-yaml",
            "The base64 values under `data:` of a Kubernetes `kind: Secret` manifest",
            High,
            &["kind: secret", "kind: \"secret", "kind: 'secret"],
            concat!(
                r#"kind:[ \t]*["']?Secret["']?[ \t]*\r?\n(?:(?:[^\n-][^\n]*)?\n){0,40}?[ \t]*data:[ \t]*\r?\n"#,
                r#"((?:[ \t]+[A-Za-z0-9_.-]+:[ \t]*["']?[A-Za-z0-9+/]*={0,2}["']?[ \t]*(?:\r?\n|$))+)"#,
                r#"|(?:^|\n)[ \t]*data:[ \t]*\r?\n"#,
                r#"((?:[ \t]+[A-Za-z0-9_.-]+:[ \t]*["']?[A-Za-z0-9+/]*={0,2}["']?[ \t]*\r?\n)+)"#,
                r#"(?:(?:[^\n-][^\n]*)?\n){0,40}?[ \t]*kind:[ \t]*["']?Secret\b"#,
            ),
            4_000,
            4_000,
        )
        .validate(has_secret_data_value)
        .raw(),
        token("age-secret-key", "age encryption secret key", Critical, &["AGE-SECRET-KEY-1"], r"\b(AGE-SECRET-KEY-1[0-9A-Z]{58})\b", 80)
            .action(Block),
        // --- Cloud providers ----------------------------------------------------------------
        token(
            "aws-access-key-id",
            "AWS access key id (long-term AKIA, temporary ASIA, ...)",
            High,
            &["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
            r"\b((?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}|A3T[A-Z0-9][A-Z2-7]{16})\b",
            24,
        ),
        named(
            "aws-secret-access-key",
            "AWS secret access key after its name",
            Critical,
            &["secret_access_key", "secretaccesskey", "secret-access-key", "aws_secret", "aws-secret", "awssecret"],
            r#"(?i)(?:aws)?[_.-]?secret(?:[_.-]?access)?[_.-]?key(?:[_.-]?id)?["']?\s*(?:=|:|=>|:=)\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            24,
            120,
        )
        .action(Block),
        named(
            "aws-session-token",
            "AWS session or security token after its name",
            High,
            &["session_token", "sessiontoken", "security_token", "securitytoken"],
            r#"(?i)(?:aws)?[_-]?(?:session|security)[_-]?token["']?\s*(?:=|:)\s*["']?([A-Za-z0-9/+=]{100,2000})"#,
            24,
            2_200,
        ),
        token(
            "aws-mws-auth-token",
            "Amazon Marketplace Web Service auth token",
            High,
            &["amzn.mws."],
            r"\b(amzn\.mws\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b",
            60,
        ),
        token("gcp-api-key", "Google Cloud / Firebase / Gemini API key", High, &["AIza"], r"\b(AIza[0-9A-Za-z_-]{35})%END", 48),
        token(
            "gcp-oauth-client-secret",
            "Google OAuth client secret",
            High,
            &["GOCSPX-"],
            r"\b(GOCSPX-[0-9A-Za-z_-]{28})%END",
            48,
        ),
        token(
            "gcp-oauth-access-token",
            "Google OAuth access token",
            High,
            &["ya29."],
            r"\b(ya29\.[0-9A-Za-z_-]{30,2048})%END",
            2_100,
        ),
        token(
            "gcp-oauth-refresh-token",
            "Google OAuth refresh token",
            High,
            &["1//0"],
            r"(?:^|[^0-9A-Za-z_/-])(1//0[0-9A-Za-z_-]{40,400})(?:[^0-9A-Za-z_/-]|$)",
            420,
        )
        .before(1),
        named(
            "gcp-service-account-key",
            "Google service-account JSON key (the private_key field)",
            Critical,
            &["\"private_key\""],
            r#""private_key"\s*:\s*"(-----BEGIN (?:RSA )?PRIVATE KEY-----(?:\\n|[A-Za-z0-9+/=])+-----END (?:RSA )?PRIVATE KEY-----(?:\\n)?)""#,
            0,
            8_000,
        )
        .action(Block)
        .raw(),
        named(
            "gcp-service-account-key-id",
            "Google service-account JSON key id",
            Medium,
            &["\"private_key_id\""],
            r#""private_key_id"\s*:\s*"([0-9a-f]{40})""#,
            0,
            100,
        ),
        named(
            "azure-storage-account-key",
            "Azure storage account key (AccountKey=... in a connection string)",
            Critical,
            &["AccountKey"],
            r"(?i)AccountKey\s*=\s*([A-Za-z0-9+/]{86}==)",
            0,
            110,
        ),
        named(
            "azure-shared-access-key",
            "Azure Service Bus / Event Hubs / IoT shared access key in a connection string",
            High,
            &["SharedAccessKey"],
            r"(?i)SharedAccessKey\s*=\s*([A-Za-z0-9+/]{42,43}=)",
            0,
            80,
        ),
        named(
            "azure-sas-token",
            "Azure shared access signature (sv=...&sig=...)",
            High,
            &["sig="],
            r"(?i)\bsv=\d{4}-\d{2}-\d{2}&[^\s\x22']{0,400}?\bsig=([A-Za-z0-9%+/]{30,120}(?:%3D|=){0,2})",
            440,
            130,
        ),
        named(
            "azure-ad-client-secret",
            "Microsoft Entra ID (Azure AD) client secret",
            High,
            &["Q~"],
            r"(?:^|[^A-Za-z0-9_~.-])([A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?:[^A-Za-z0-9_~.-]|$)",
            6,
            40,
        ),
        token(
            "azure-devops-pat",
            "Azure DevOps personal access token (84-character format)",
            High,
            &["JQQJ99"],
            r"\b([A-Za-z0-9]{52}JQQJ99[A-Za-z0-9]{18}AZDO[A-Za-z0-9]{4})\b",
            40,
        )
        .before(52),
        token(
            "digitalocean-token",
            "DigitalOcean personal, OAuth or refresh token",
            High,
            &["dop_v1_", "doo_v1_", "dor_v1_"],
            r"\b(do[por]_v1_[a-f0-9]{64})\b",
            80,
        ),
        token("alibaba-access-key-id", "Alibaba Cloud access key id", High, &["LTAI"], r"\b(LTAI[A-Za-z0-9]{20})\b", 30),
        token("databricks-token", "Databricks personal access token", High, &["dapi"], r"\b(dapi[a-f0-9]{32}(?:-\d)?)\b", 40),
        token(
            "hashicorp-vault-token",
            "HashiCorp Vault service or batch token",
            High,
            &["hvs.", "hvb."],
            r"\b(hv[sb]\.[A-Za-z0-9_-]{24,300})%END",
            310,
        ),
        named(
            "terraform-cloud-token",
            "Terraform Cloud / Enterprise API token",
            High,
            &[".atlasv1."],
            r"\b([A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70})(?:[^A-Za-z0-9_=-]|$)",
            14,
            90,
        ),
        token(
            "flyio-token",
            "Fly.io access token or macaroon",
            High,
            &["fo1_", "fm1a_", "fm1r_", "fm2_"],
            r"\b(fo1_[A-Za-z0-9_-]{43}|fm(?:1[ar]|2)_[A-Za-z0-9+/=_-]{100,3000})(?:[^A-Za-z0-9+/=_-]|$)",
            3_100,
        ),
        token("supabase-token", "Supabase personal access token", High, &["sbp_"], r"\b(sbp_[a-f0-9]{40})\b", 50),
        token(
            "planetscale-token",
            "PlanetScale API token, password or OAuth token",
            High,
            &["pscale_tkn_", "pscale_pw_", "pscale_oauth_"],
            r"\b(pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64})(?:[^A-Za-z0-9_.=-]|$)",
            80,
        ),
        token("heroku-api-key", "Heroku API key (HRKU- format)", High, &["HRKU-"], r"\b(HRKU-[A-Za-z0-9_-]{30,80})%END", 90),
        named(
            "cloudflare-api-token",
            "Cloudflare API token or global key after its name",
            High,
            &["cloudflare", "cf_api"],
            r#"(?i)(?:cloudflare|cf)[_-]?(?:api)?[_-]?(?:token|key)["']?\s*(?:=|:)\s*["']?([A-Za-z0-9_-]{37,40})(?:[^A-Za-z0-9_-]|$)"#,
            8,
            120,
        ),
        token("linear-api-key", "Linear API key", Medium, &["lin_api_"], r"\b(lin_api_[A-Za-z0-9]{40})\b", 50),
        token("postman-api-key", "Postman API key", Medium, &["PMAK-"], r"\b(PMAK-[a-f0-9]{24}-[a-f0-9]{34})\b", 70),
        token(
            "grafana-token",
            "Grafana Cloud API token, service account token or legacy API key",
            High,
            &["glc_", "glsa_", "eyJrIjoi"],
            r"\b(glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|eyJrIjoi[A-Za-z0-9]{70,400}={0,2})(?:[^A-Za-z0-9+/=_]|$)",
            420,
        ),
        token("newrelic-user-key", "New Relic user API key", High, &["NRAK-"], r"\b(NRAK-[A-Z0-9]{27})\b", 40),
        token(
            "sentry-auth-token",
            "Sentry organization or user auth token",
            High,
            &["sntrys_", "sntryu_"],
            r"\b(sntryu_[a-f0-9]{64}|sntrys_[A-Za-z0-9+/=_]{60,400})(?:[^A-Za-z0-9+/=_]|$)",
            420,
        ),
        named(
            "sentry-dsn",
            "Sentry DSN (its public key: low risk)",
            Low,
            &["sentry.io/"],
            r"https?://([0-9a-f]{32})@[a-z0-9.-]{0,40}sentry\.io/\d+",
            90,
            20,
        )
        .action(Warn),
        token(
            "doppler-token",
            "Doppler personal, service, CLI or service-account token",
            High,
            &["dp.pt.", "dp.st.", "dp.ct.", "dp.sa.", "dp.scim.", "dp.audit."],
            r"\b(dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44})\b",
            60,
        ),
        token("pulumi-token", "Pulumi access token", High, &["pul-"], r"\b(pul-[a-f0-9]{40})\b", 50),
        token("atlassian-api-token", "Atlassian (Jira, Confluence) API token", High, &["ATATT3"], r"\b(ATATT3[A-Za-z0-9_=-]{150,250})(?:[^A-Za-z0-9_=-]|$)", 260),
        token(
            "shopify-token",
            "Shopify admin, custom app, partner or shared secret token",
            High,
            &["shpat_", "shpss_", "shpca_", "shppa_"],
            r"\b(shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32})\b",
            40,
        ),
        token("tailscale-key", "Tailscale auth or API key", High, &["tskey-"], r"\b(tskey-(?:auth|api|client|webhook|scim)-[A-Za-z0-9]{6,20}-[A-Za-z0-9]{20,64})\b", 100),
        token(
            "dynatrace-token",
            "Dynatrace API token",
            High,
            &["dt0c01."],
            r"\b(dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64})\b",
            100,
        ),
        token("onepassword-service-token", "1Password service account token", Critical, &["ops_eyJ"], r"\b(ops_eyJ[A-Za-z0-9+/=_-]{250,2000})(?:[^A-Za-z0-9+/=_-]|$)", 2_100),
        // --- Code hosts ---------------------------------------------------------------------
        token("github-pat-classic", "GitHub personal access token (classic)", High, &["ghp_"], r"\b(ghp_[A-Za-z0-9]{36})\b", 40),
        token("github-oauth-token", "GitHub OAuth access token", High, &["gho_"], r"\b(gho_[A-Za-z0-9]{36})\b", 40),
        token(
            "github-app-token",
            "GitHub App user-to-server or installation token",
            High,
            &["ghu_", "ghs_"],
            r"\b(gh[us]_[A-Za-z0-9]{36})\b",
            40,
        ),
        token("github-refresh-token", "GitHub App refresh token", High, &["ghr_"], r"\b(ghr_[A-Za-z0-9]{36,76})\b", 80),
        token(
            "github-fine-grained-pat",
            "GitHub fine-grained personal access token",
            High,
            &["github_pat_"],
            r"\b(github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})\b",
            94,
        ),
        token(
            "gitlab-pat",
            "GitLab personal, project or group access token",
            High,
            &["glpat-"],
            r"\b(glpat-[A-Za-z0-9_-]{20,64}(?:\.[0-9a-z]{2}\.[0-9a-z]{9})?)%END",
            90,
        ),
        token(
            "gitlab-runner-token",
            "GitLab runner authentication or registration token",
            High,
            &["glrt-", "GR1348941"],
            r"\b(glrt-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{2}\.?[0-9a-z]{7})?|GR1348941[A-Za-z0-9_-]{20,40})%END",
            80,
        ),
        token(
            "gitlab-other-token",
            "GitLab pipeline trigger, deploy, feed, OAuth, agent, CI job, incoming mail, SCIM or feature-flag token",
            High,
            &["glptt-", "gldt-", "glft-", "glsoat-", "glimt-", "glagent-", "gloas-", "glcbt-", "glffct-"],
            r"\b(gl(?:ptt|dt|ft|soat|imt|agent|oas|cbt|ffct)-[A-Za-z0-9_-]{20,64})%END",
            80,
        ),
        token(
            "bitbucket-app-password",
            "Bitbucket app password or API token",
            High,
            &["ATBB", "ATCTT3"],
            r"\b(ATBB[A-Za-z0-9_=.-]{28,40}|ATCTT3[A-Za-z0-9_=-]{150,250})(?:[^A-Za-z0-9_=.-]|$)",
            260,
        ),
        // --- AI providers -------------------------------------------------------------------
        token(
            "anthropic-api-key",
            "Anthropic API or admin key",
            Critical,
            &["sk-ant-"],
            r"\b(sk-ant-(?:api|admin|oat|ort)\d{2}-[A-Za-z0-9_-]{80,120})%END",
            140,
        ),
        token(
            "openai-api-key",
            "OpenAI project, service-account, admin or legacy API key",
            Critical,
            &["sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-", "T3BlbkFJ"],
            r"\b(sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{40,200}|sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})%END",
            210,
        )
        .before(23),
        token("openrouter-api-key", "OpenRouter API key", High, &["sk-or-v1-"], r"\b(sk-or-v1-[a-f0-9]{64})\b", 80),
        token(
            "huggingface-token",
            "Hugging Face user or organization access token",
            High,
            &["hf_", "api_org_"],
            r"\b(hf_[A-Za-z]{34}|api_org_[A-Za-z]{34})\b",
            44,
        ),
        token("groq-api-key", "Groq API key", High, &["gsk_"], r"\b(gsk_[A-Za-z0-9]{52})\b", 60),
        token("replicate-api-token", "Replicate API token", High, &["r8_"], r"\b(r8_[A-Za-z0-9]{37})\b", 44),
        token("perplexity-api-key", "Perplexity API key", High, &["pplx-"], r"\b(pplx-[A-Za-z0-9]{48})\b", 56),
        token("xai-api-key", "xAI (Grok) API key", High, &["xai-"], r"\b(xai-[A-Za-z0-9]{80})\b", 88),
        token(
            "langsmith-api-key",
            "LangSmith personal or service key",
            High,
            &["lsv2_"],
            r"\b(lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10})\b",
            60,
        ),
        token("nvidia-api-key", "NVIDIA NGC / build.nvidia.com API key", High, &["nvapi-"], r"\b(nvapi-[A-Za-z0-9_-]{64})%END", 72),
        // --- Payments -----------------------------------------------------------------------
        token(
            "stripe-secret-key",
            "Stripe secret or restricted key (live or test)",
            Critical,
            &["sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_"],
            r"\b((?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{24,247})\b",
            260,
        ),
        token("stripe-webhook-secret", "Stripe webhook signing secret", High, &["whsec_"], r"\b(whsec_[A-Za-z0-9+/=]{32,88})(?:[^A-Za-z0-9+/=]|$)", 100),
        token(
            "square-access-token",
            "Square access token",
            High,
            &["sq0atp-", "EAAA"],
            r"\b(sq0atp-[A-Za-z0-9_-]{22}|EAAA[A-Za-z0-9_-]{60})(?:[^A-Za-z0-9_+/=-]|$)",
            70,
        ),
        token("square-oauth-secret", "Square OAuth application secret", High, &["sq0csp-"], r"\b(sq0csp-[A-Za-z0-9_-]{43})%END", 54),
        token(
            "braintree-access-token",
            "PayPal Braintree access token",
            Critical,
            &["access_token$production$", "access_token$sandbox$"],
            r"(access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32})\b",
            90,
        ),
        token("shippo-token", "Shippo API token", High, &["shippo_live_", "shippo_test_"], r"\b(shippo_(?:live|test)_[a-f0-9]{40})\b", 56),
        token(
            "flutterwave-secret-key",
            "Flutterwave secret key",
            High,
            &["FLWSECK-", "FLWSECK_TEST-"],
            r"\b(FLWSECK(?:_TEST)?-[a-f0-9]{32}-X)\b",
            52,
        ),
        token("easypost-api-key", "EasyPost production or test API key", High, &["EZAK", "EZTK"], r"\b(EZ[AT]K[A-Za-z0-9]{54})\b", 60),
        token("duffel-token", "Duffel API token", High, &["duffel_test_", "duffel_live_"], r"\b(duffel_(?:test|live)_[A-Za-z0-9_=-]{43})(?:[^A-Za-z0-9_=-]|$)", 60),
        // --- Messaging ----------------------------------------------------------------------
        token(
            "slack-token",
            "Slack bot, user, app, refresh or configuration token",
            High,
            &["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxo-", "xoxe-", "xoxe.xox"],
            r"\b(xox[abeoprs]-(?:\d+-)*[0-9A-Za-z]{8,200}(?:-[0-9A-Za-z]{8,200})?|xoxe\.xox[bp]-1-[A-Za-z0-9-]{100,300})\b",
            320,
        ),
        token("slack-app-token", "Slack app-level token", High, &["xapp-"], r"\b(xapp-\d-[A-Z0-9]{9,12}-\d{10,14}-[a-f0-9]{64})\b", 110),
        named(
            "slack-webhook-url",
            "Slack incoming webhook or workflow URL (its secret path)",
            High,
            &["hooks.slack.com"],
            r"hooks\.slack\.com\\?/(?:services|workflows|triggers)\\?/([A-Za-z0-9+/_\\-]{40,130})",
            0,
            160,
        ),
        // The keyword carries the first hex digit: a bare `SK` hits every `task` and `disk`.
        token("twilio-api-key", "Twilio API key SID", High, TWILIO_KEYWORDS, r"\b(SK[0-9a-f]{32})\b", 36)
            .entropy(3.0)
            // The keyword ends with the first of the 32 hex digits.
            .precheck(|b, end| {
                b.len() >= end + 31 && b[end..end + 31].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            }),
        named(
            "twilio-auth-token",
            "Twilio auth token or API secret after its name",
            High,
            &["twilio"],
            r#"(?i)twilio[_-]?(?:auth[_-]?token|api[_-]?secret|secret)["']?\s*(?:=|:)\s*["']?([a-f0-9]{32})\b"#,
            0,
            80,
        ),
        token("sendgrid-api-key", "SendGrid API key", High, &["SG."], r"\b(SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})%END", 72),
        token("mailgun-api-key", "Mailgun API key", High, &["key-"], r"\b(key-[0-9a-f]{32})\b", 40),
        token("mailchimp-api-key", "Mailchimp (Intuit) API key", High, &["-us"], r"\b([0-9a-f]{32}-us[0-9]{1,2})\b", 8).before(33),
        token(
            "telegram-bot-token",
            "Telegram bot token",
            High,
            &[":AA"],
            r"(?:^|[^0-9A-Za-z_]|bot)(\d{8,10}:AA[A-Za-z0-9_-]{33})%END",
            40,
        )
        .before(15),
        named(
            "discord-bot-token",
            "Discord bot token near the word discord",
            High,
            &["discord"],
            r#"(?i)discord.{0,40}?[:=]\s*["']?(?-i:([MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}))(?:[^A-Za-z0-9_-]|$)"#,
            0,
            160,
        ),
        named(
            "discord-webhook-url",
            "Discord webhook URL (its token)",
            High,
            &["/api/webhooks/"],
            r"discord(?:app)?\.com/api/webhooks/\d{17,20}/([A-Za-z0-9_-]{60,68})(?:[^A-Za-z0-9_-]|$)",
            16,
            120,
        ),
        named(
            "teams-webhook-url",
            "Microsoft Teams incoming webhook URL (its secret path)",
            High,
            &[".webhook.office.com/"],
            r"\.webhook\.office\.com/webhookb2/([A-Za-z0-9@/_-]{40,300})",
            0,
            330,
        ),
        token(
            "firebase-fcm-server-key",
            "Firebase Cloud Messaging legacy server key",
            High,
            &[":APA91b"],
            r"\b(AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{134})%END",
            150,
        )
        .before(11),
        token(
            "facebook-access-token",
            "Facebook (Meta) user or page access token",
            High,
            &["EAACEdEose0cBA", "EAAM", "EAAC"],
            r"\b(EAACEdEose0cBA[0-9A-Za-z]{20,300}|EAA[MC][0-9A-Za-z]{100,400})\b",
            420,
        ),
        // --- Package registries and developer tools -----------------------------------------
        token("npm-access-token", "npm access token", High, &["npm_"], r"\b(npm_[A-Za-z0-9]{36})\b", 40),
        named(
            "npmrc-auth-token",
            "_authToken in an .npmrc",
            High,
            &["_authToken"],
            r#"(?i)_authToken\s*=\s*["']?([A-Za-z0-9_+/=.-]{20,200})"#,
            0,
            230,
        ),
        token(
            "pypi-token",
            "PyPI or TestPyPI upload token",
            High,
            &["pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"],
            r"\b(pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,300})%END",
            340,
        ),
        token("rubygems-api-key", "RubyGems API key", High, &["rubygems_"], r"\b(rubygems_[a-f0-9]{48})\b", 60),
        token("cratesio-api-token", "crates.io API token", High, &["cio"], r"\b(cio[A-Za-z0-9]{32})\b", 36),
        token("nuget-api-key", "NuGet API key", High, &["oy2"], r"\b(oy2[a-z0-9]{43})\b", 48),
        token("clojars-token", "Clojars deploy token", High, &["CLOJARS_"], r"\b(CLOJARS_[a-z0-9]{60})\b", 70),
        token(
            "dockerhub-token",
            "Docker Hub personal or organization access token",
            High,
            &["dckr_pat_", "dckr_oat_"],
            r"\b(dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,40})%END",
            52,
        ),
        named(
            "docker-config-auth",
            "base64 user:password in a Docker config.json `auth` field",
            High,
            &["\"auth\""],
            r#""auth"\s*:\s*"([A-Za-z0-9+/]{12,400}={0,2})""#,
            0,
            420,
        )
        .validate(is_basic_credential),
        token(
            "jfrog-token",
            "JFrog Artifactory API key or identity token",
            High,
            &["AKCp", "cmVmdGtuOjAxOj"],
            r"\b(AKCp[A-Za-z0-9]{69}|cmVmdGtuOjAxOj[A-Za-z0-9]{50,100})\b",
            120,
        ),
        token("contentful-token", "Contentful personal access token", Medium, &["CFPAT-"], r"\b(CFPAT-[A-Za-z0-9_-]{43})%END", 52),
        token("figma-token", "Figma personal access token", Medium, &["figd_"], r"\b(figd_[A-Za-z0-9_-]{40})%END", 50),
        token(
            "notion-token",
            "Notion integration token",
            High,
            &["secret_", "ntn_"],
            r"\b(secret_[A-Za-z0-9]{43}|ntn_[0-9]{11}[A-Za-z0-9]{35})\b",
            52,
        ),
        token("prefect-api-key", "Prefect API key", High, &["pnu_"], r"\b(pnu_[A-Za-z0-9]{36})\b", 42),
        token("readme-api-key", "ReadMe API key", Medium, &["rdme_"], r"\b(rdme_[a-z0-9]{70})\b", 78),
        token(
            "mapbox-secret-token",
            "Mapbox secret access token",
            High,
            &["sk.eyJ"],
            r"\b(sk\.eyJ[A-Za-z0-9_-]{50,400}\.[A-Za-z0-9_-]{22})\b",
            440,
        ),
        named(
            "okta-api-token",
            "Okta API token after its name",
            High,
            &["okta"],
            r#"(?i)okta[_-]?(?:api[_-]?)?(?:token|key)["']?\s*(?:=|:)\s*["']?(00[A-Za-z0-9_-]{40})(?:[^A-Za-z0-9_-]|$)"#,
            0,
            90,
        ),
        // --- More providers with distinctive prefixes ----------------------------------------
        token(
            "onepassword-secret-key",
            "1Password account secret key (A3-...)",
            Critical,
            &["A3-"],
            r"\b(A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5})\b",
            50,
        )
        .entropy(3.0),
        token("adobe-client-secret", "Adobe OAuth client secret", High, &["p8e-"], r"\b(p8e-[A-Za-z0-9]{32})%END", 40),
        // Its prefix `pat` is in every `path`: the keyword is the name airtable, as in gitleaks.
        named(
            "airtable-pat",
            "Airtable personal access token after the name airtable",
            High,
            &["airtable"],
            r"\b(pat[A-Za-z0-9]{14}\.[a-f0-9]{64})\b",
            0,
            300,
        ),
        named(
            "authress-access-key",
            "Authress service client access key",
            High,
            &[".acc_", ".acc-"],
            r"\b((?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-][A-Za-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120})(?:[^A-Za-z0-9+/_=-]|$)",
            50,
            170,
        ),
        token(
            "aws-bedrock-api-key",
            "Amazon Bedrock API key (long-term ABSK, short-term bedrock-api-key-)",
            Critical,
            &["ABSK", "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t"],
            r"\b(ABSK[A-Za-z0-9+/]{109,269}={0,2}|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=%_-]{20,4000})(?:[^A-Za-z0-9+/=%_-]|$)",
            4_100,
        )
        .entropy(3.0),
        token("clickhouse-cloud-key", "ClickHouse Cloud API secret key", High, &["4b1d"], r"\b(4b1d[A-Za-z0-9]{38})\b", 44)
            .entropy(3.0),
        token(
            "cloudflare-origin-ca-key",
            "Cloudflare Origin CA key",
            High,
            &["v1.0-"],
            r"\b(v1\.0-[a-f0-9]{24}-[a-f0-9]{146})%END",
            180,
        ),
        token(
            "defined-networking-token",
            "Defined Networking (Nebula) API token",
            High,
            &["dnkey-"],
            r"\b(dnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52})(?:[^A-Za-z0-9=_-]|$)",
            90,
        ),
        token(
            "flutterwave-encryption-key",
            "Flutterwave encryption key",
            High,
            &["FLWSECK_TEST", "FLWSECK"],
            r"\b(FLWSECK(?:_TEST)?-?[a-f0-9]{12})\b",
            30,
        ),
        token("frameio-api-token", "Frame.io API token", High, &["fio-u-"], r"\b(fio-u-[A-Za-z0-9_=-]{64})(?:[^A-Za-z0-9_=-]|$)", 72),
        named(
            "gitlab-session-cookie",
            "GitLab session cookie",
            High,
            &["_gitlab_session="],
            r"_gitlab_session=([0-9a-z]{32})\b",
            0,
            52,
        ),
        token(
            "harness-api-key",
            "Harness personal or service account token",
            High,
            &["pat.", "sat."],
            r"\b((?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20})\b",
            76,
        )
        .precheck(|b, end| b.get(end + 22) == Some(&b'.')),
        token(
            "hubspot-private-app-token",
            "HubSpot private app access token",
            High,
            &["pat-na", "pat-eu"],
            r"\b(pat-(?:na|eu)\d-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b",
            50,
        ),
        token("infracost-api-token", "Infracost API token", High, &["ico-"], r"\b(ico-[A-Za-z0-9]{32})\b", 40).entropy(3.0),
        token(
            "intra42-client-secret",
            "42 intranet (Intra) client secret",
            High,
            &["s-s4t2ud-", "s-s4t2af-"],
            r"\b(s-s4t2(?:ud|af)-[a-f0-9]{64})\b",
            76,
        ),
        token(
            "jwt-base64",
            "A JSON Web Token encoded once more in base64",
            High,
            &["ZXlK"],
            r"\b(ZXlK[A-Za-z0-9+/_-]{60,8000}={0,2})(?:[^A-Za-z0-9+/_=-]|$)",
            8_100,
        )
        .validate(is_base64_jwt),
        named(
            "lob-api-key",
            "Lob live or test secret API key after the name lob",
            High,
            &["live_", "test_"],
            r#"(?i)(?:\b|_)lob[A-Za-z0-9_.-]{0,24}?["']?[ \t]*(?:=>|:=|=|:)[ \t]*["']?(?-i:((?:live|test)_[a-f0-9]{35}))(?:[^A-Za-z0-9_-]|$)"#,
            40,
            48,
        )
        .precheck(|b, end| b.len() >= end + 35 && b[end..end + 35].iter().all(u8::is_ascii_hexdigit)),
        token(
            "maxmind-license-key",
            "MaxMind license key",
            High,
            &["_mmk"],
            r"\b([A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk)\b",
            8,
        )
        .before(36)
        .entropy(3.0),
        token("netlify-pat", "Netlify personal access token (nfp_)", High, &["nfp_"], r"\b(nfp_[A-Za-z0-9]{36})\b", 44),
        token("newrelic-insert-key", "New Relic insert key", High, &["NRII-"], r"\b(NRII-[A-Za-z0-9_-]{32})%END", 40),
        named(
            "nuget-config-password",
            "Password in a NuGet.config <packageSourceCredentials> entry",
            High,
            &["key=\"password\"", "key=\"cleartextpassword\""],
            r#"(?i)<add\s+key="(?:ClearText)?Password"\s+value="([^"]{8,200})""#,
            24,
            240,
        )
        .validate(is_real_password),
        token("octopus-deploy-api-key", "Octopus Deploy API key", High, &["API-"], r"\b(API-[A-Z0-9]{26})\b", 32).entropy(3.0),
        token(
            "openshift-user-token",
            "OpenShift user token (sha256~)",
            High,
            &["sha256~"],
            r"\b(sha256~[A-Za-z0-9_-]{43})%END",
            52,
        ),
        token(
            "plaid-access-token",
            "Plaid access token",
            High,
            &["access-sandbox-", "access-development-", "access-production-"],
            r"\b(access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b",
            60,
        ),
        token("scalingo-api-token", "Scalingo API token", High, &["tk-us-"], r"\b(tk-us-[A-Za-z0-9_-]{48})%END", 56),
        token(
            "brevo-api-key",
            "Brevo (Sendinblue) API or SMTP key",
            High,
            &["xkeysib-", "xsmtpsib-"],
            r"\b(x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16})\b",
            92,
        ),
        token(
            "settlemint-token",
            "SettleMint application, personal or service access token",
            High,
            &["sm_aat_", "sm_pat_", "sm_sat_"],
            r"\b(sm_(?:aat|pat|sat)_[A-Za-z0-9]{16})\b",
            24,
        )
        .entropy(3.0),
        named(
            "sidekiq-secret",
            "Sidekiq Pro/Enterprise credentials (BUNDLE_..._CONTRIBSYS__COM or in the gem source URL)",
            High,
            &["contribsys"],
            r#"(?i)(?:bundle_(?:enterprise|gems)__contribsys__com["']?[ \t]*(?:=|:)[ \t]*["']?([a-f0-9]{8}:[a-f0-9]{8})\b|https?://([a-f0-9]{8}:[a-f0-9]{8})@(?:gems|enterprise)\.contribsys\.com)"#,
            40,
            80,
        ),
        token(
            "sonarqube-token",
            "SonarQube / SonarCloud user, project or global analysis token",
            High,
            &["squ_", "sqp_", "sqa_"],
            r"\b(sq[upa]_[a-f0-9]{40})\b",
            48,
        ),
        token(
            "sourcegraph-token",
            "Sourcegraph access token (sgp_)",
            High,
            &["sgp_"],
            r"\b(sgp_(?:[a-f0-9]{16}_|local_)?[a-f0-9]{40})\b",
            70,
        ),
        token("typeform-token", "Typeform personal access token", High, &["tfp_"], r"\b(tfp_[A-Za-z0-9_.=-]{59})(?:[^A-Za-z0-9_.=-]|$)", 66),
        named(
            "curl-user-password",
            "Password in a curl -u / --user option",
            Medium,
            &["curl"],
            r#"\bcurl\b[^\n]{0,300}?[ \t](?:-u|--user)(?:[ \t]+|=)?["']?[^\s:"']{1,64}:([^\s"']{4,128})"#,
            0,
            500,
        )
        .validate(is_real_password)
        .entropy(2.5)
        .generic(),
        // --- Tokens and URLs with embedded credentials ---------------------------------------
        token(
            "jwt",
            "JSON Web Token (header.payload.signature)",
            High,
            &["eyJ"],
            r"\b(eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{16,})%END",
            16_000,
        ),
        named(
            "database-url-password",
            "Password in a database or broker URL (postgres://user:PASSWORD@host)",
            High,
            &[
                "postgres://",
                "postgresql://",
                "mysql://",
                "mariadb://",
                "mongodb://",
                "mongodb+srv://",
                "redis://",
                "rediss://",
                "amqp://",
                "amqps://",
                "mssql://",
                "sqlserver://",
                "clickhouse://",
                "cockroachdb://",
                "couchdb://",
            ],
            r#"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|clickhouse|cockroachdb|couchdb)://[^\s:/@'"\[]{0,64}:([^\s@/'"]{1,128})@(?:[A-Za-z0-9-]{1,63}\.[A-Za-z0-9-]|\[[0-9A-Fa-f:]|[A-Za-z0-9-]{2,63}(?:[:/]|\s|$))"#,
            0,
            240,
        )
        .validate(is_real_password),
        named(
            "url-basic-auth",
            "Password in a URL's user-info (https://user:PASSWORD@host)",
            Medium,
            &["://"],
            r#"(?i)\b(?:https?|ftps?|sftp|ssh|git|smtps?|imaps?|ldaps?)://[^\s:/@'"\[]{1,64}:([^\s@/'"]{4,128})@(?:[A-Za-z0-9-]{1,63}\.[A-Za-z0-9-]|\[[0-9A-Fa-f:]|[A-Za-z0-9-]{2,63}(?:[:/]|\s|$))"#,
            12,
            240,
        )
        .validate(is_strong_url_password)
        .entropy(2.5)
        .precheck(has_userinfo)
        .generic(),
        named(
            "authorization-bearer",
            "Bearer token in an Authorization header or after `Bearer`",
            Medium,
            &["bearer "],
            r"(?i)\bbearer +([A-Za-z0-9._~+/-]{20,2048}=*)(?:[^A-Za-z0-9._~+/=-]|$)",
            0,
            2_100,
        )
        .entropy(3.3)
        .generic(),
        named(
            "authorization-basic",
            "Credentials in an HTTP Basic Authorization header",
            Medium,
            &["authorization"],
            r#"(?i)\bauthorization["']?\s*[:=]\s*["']?basic\s+([A-Za-z0-9+/]{8,400}={0,2})"#,
            0,
            440,
        )
        .validate(is_basic_credential)
        .generic(),
        named(
            "netrc-password",
            "Password in a .netrc entry",
            Medium,
            &["machine"],
            r"\bmachine\s+\S+\s+login\s+\S+\s+password\s+(\S{4,128})",
            0,
            400,
        )
        .validate(is_real_password)
        .entropy(2.5)
        .generic(),
    ];
    rules.extend(specs.into_iter().map(Spec::build));
    rules.extend(super::vendors::rules());
    rules.extend([
        assignment(
            "generic-password",
            "A password, passphrase or pwd assigned a literal value",
            &["passw", "pwd", "passphrase"],
            Class::Password,
        ),
        assignment("generic-secret", "A secret assigned a high-entropy literal value", &["secret"], Class::Secret),
        assignment("generic-token", "A token assigned a high-entropy literal value", &["token"], Class::Token),
        assignment(
            "generic-api-key",
            "A key (api_key, access_key, ...) assigned a high-entropy literal value",
            &["key"],
            Class::ApiKey,
        ),
    ]);
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_rules_build_with_unique_ids() {
        let rules = builtin();
        assert!(rules.len() >= 61, "{} rules", rules.len());
        let mut ids: Vec<_> = rules.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "duplicate rule ids");
        for r in &rules {
            assert!(r.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "{}", r.id);
            if !matches!(r.matcher, Matcher::SecretValue) {
                assert!(!r.keywords.is_empty(), "{} has no keyword", r.id);
            }
        }
    }

    #[test]
    fn base64_credentials() {
        assert!(is_basic_credential(b"dXNlcjpwYXNz")); // user:pass
        assert!(!is_basic_credential(b"aGVsbG8gd29ybGQ=")); // hello world
        assert!(!is_basic_credential(b"not base64!"));
    }
}
