//! Credentials recognised by the provider's name next to them: `TWITTER_API_SECRET = <45
//! alphanumerics>`, `"datadog_app_key": "<40 hex>"`. The value alone has no distinctive prefix,
//! so the rule needs both: the provider's name (the keyword), at most 24 more name characters,
//! an assignment, and a value of the provider's documented shape.
//!
//! One row per provider; [`rules`] turns each row into a rule with the same pattern skeleton.
//! The value's shape is matched case-sensitively even though the name is not.

use super::LeakAction::Redact;
use super::Rule;
use super::Severity::High;
use super::engine::{Filter, Matcher, compile};

/// A UUID in lower- or upper-case hex.
const UUID: &str = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

struct Row {
    id: &'static str,
    description: &'static str,
    /// Provider names (keywords, matched ASCII case-insensitively); one must start the name.
    names: &'static [&'static str],
    /// The value's shape (alternatives longest first: the first that fits wins).
    value: &'static str,
    /// Values with long runs of one character are real for this provider (Twitter bearer
    /// tokens start with 22 `A`s): skip the placeholder filter.
    raw: bool,
}

const fn row(id: &'static str, description: &'static str, names: &'static [&'static str], value: &'static str) -> Row {
    Row { id, description, names, value, raw: false }
}

const ROWS: &[Row] = &[
    row(
        "adafruit-api-key",
        "Adafruit IO key after the name adafruit",
        &["adafruit"],
        "aio_[A-Za-z0-9]{28}|[A-Za-z0-9_-]{32}",
    ),
    row("airtable-api-key", "Airtable legacy API key after the name airtable", &["airtable"], "key[A-Za-z0-9]{14}"),
    row("algolia-api-key", "Algolia admin or search API key after the name algolia", &["algolia"], "[A-Za-z0-9]{32}"),
    row(
        "alibaba-secret-key",
        "Alibaba Cloud access key secret after the name alibaba or aliyun",
        &["alibaba", "aliyun"],
        "[A-Za-z0-9]{30}",
    ),
    row("asana-client-secret", "Asana OAuth client secret after the name asana", &["asana"], "[A-Za-z0-9]{32}"),
    row(
        "atlassian-legacy-token",
        "Atlassian (Jira, Confluence) 24-character API token after the product's name",
        &["atlassian", "confluence", "jira"],
        "[A-Za-z0-9]{24}",
    ),
    row("beamer-api-key", "Beamer API key after the name beamer", &["beamer"], "b_[A-Za-z0-9=_-]{44}"),
    row(
        "bitbucket-client-secret",
        "Bitbucket OAuth consumer secret after the name bitbucket",
        &["bitbucket"],
        "[A-Za-z0-9=_-]{64}|[A-Za-z0-9]{32}",
    ),
    row("bittrex-api-key", "Bittrex API key or secret after the name bittrex", &["bittrex"], "[A-Za-z0-9]{32}"),
    row("cisco-meraki-api-key", "Cisco Meraki dashboard API key after the name meraki", &["meraki"], "[0-9a-f]{40}"),
    row(
        "codecov-token",
        "Codecov upload or access token after the name codecov",
        &["codecov"],
        "[A-Za-z0-9]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    ),
    row(
        "cohere-api-key",
        "Cohere API key after the name cohere (CO_API_KEY)",
        &["cohere", "co_api_key"],
        "[A-Za-z0-9]{40}",
    ),
    row("coinbase-token", "Coinbase API token after the name coinbase", &["coinbase"], "[A-Za-z0-9_-]{64}"),
    row(
        "confluent-api-key",
        "Confluent Cloud API key or secret after the name confluent",
        &["confluent"],
        "[A-Za-z0-9+/]{64}|[A-Z0-9]{16}",
    ),
    row(
        "contentful-delivery-token",
        "Contentful delivery or preview API token after the name contentful",
        &["contentful"],
        "[A-Za-z0-9_-]{43}",
    ),
    row(
        "datadog-api-key",
        "Datadog API key (32 hex) or application key (40 hex) after the name datadog",
        &["datadog", "dd_api_key", "dd_app_key", "dd_application_key"],
        "[a-f0-9]{40}|[a-f0-9]{32}",
    ),
    row(
        "discord-client-secret",
        "Discord client secret or public key after the name discord",
        &["discord"],
        "[a-f0-9]{64}|[A-Za-z0-9_-]{32}",
    ),
    row(
        "droneci-token",
        "Drone CI access token after the name drone",
        &["droneci", "drone_token", "drone-token", "drone_server_token"],
        "[A-Za-z0-9]{32}",
    ),
    Row {
        id: "dropbox-token",
        description: "Dropbox short-lived (sl.), long-lived or app token after the name dropbox",
        names: &["dropbox"],
        value: r"sl\.[A-Za-z0-9._-]{130,1500}|[A-Za-z0-9]{11}AAAAAAAAAA[A-Za-z0-9_=-]{43}|[a-z0-9]{15}",
        raw: true,
    },
    row("etsy-api-key", "Etsy API key after the name etsy", &["etsy"], "[A-Za-z0-9]{24}"),
    row(
        "facebook-app-secret",
        "Facebook (Meta) app secret after the name facebook",
        &["facebook", "fb_app_secret", "fb_secret"],
        "[a-f0-9]{32}",
    ),
    row(
        "facebook-app-access-token",
        "Facebook app access token (app id|secret) after the name facebook",
        &["facebook", "fb_access_token", "fb_token"],
        r"[0-9]{15,16}(?:\||%7[Cc])[A-Za-z0-9_-]{27,40}",
    ),
    row("fastly-api-token", "Fastly API token after the name fastly", &["fastly"], "[A-Za-z0-9_-]{32}"),
    row(
        "finicity-credential",
        "Finicity app key or partner secret after the name finicity",
        &["finicity"],
        "[a-f0-9]{32}|[A-Za-z0-9]{20}",
    ),
    row("finnhub-api-key", "Finnhub API key after the name finnhub", &["finnhub"], "[a-z0-9]{20}"),
    row("flickr-api-key", "Flickr API key after the name flickr", &["flickr"], "[A-Za-z0-9]{32}"),
    row("freshbooks-token", "FreshBooks access token after the name freshbooks", &["freshbooks"], "[A-Za-z0-9]{64}"),
    row("gitter-token", "Gitter access token after the name gitter", &["gitter"], "[A-Za-z0-9_-]{40}"),
    row(
        "gocardless-token",
        "GoCardless live or sandbox access token after the name gocardless",
        &["gocardless"],
        "(?:live|sandbox)_[A-Za-z0-9_=-]{40}",
    ),
    row(
        "hashicorp-vault-legacy-token",
        "HashiCorp Vault legacy service token (s.) after the name vault",
        &["vault"],
        r"s\.[A-Za-z0-9]{24}",
    ),
    row("heroku-legacy-api-key", "Heroku legacy API key (a UUID) after the name heroku", &["heroku"], UUID),
    row("hubspot-api-key", "HubSpot legacy API key (a UUID) after the name hubspot", &["hubspot"], UUID),
    row("intercom-token", "Intercom access token after the name intercom", &["intercom"], "[A-Za-z0-9=_-]{60}"),
    row(
        "jfrog-identity-token",
        "JFrog (Artifactory, Xray) API key or identity token after the product's name",
        &["jfrog", "artifactory", "bintray", "xray"],
        "[A-Za-z0-9]{73}|[A-Za-z0-9]{64}",
    ),
    row(
        "kraken-api-key",
        "Kraken API key or private key after the name kraken",
        &["kraken"],
        "[A-Za-z0-9/=_+-]{80,90}",
    ),
    row(
        "kucoin-credential",
        "KuCoin API key or secret after the name kucoin",
        &["kucoin"],
        "[a-f0-9]{24}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    ),
    row(
        "launchdarkly-token",
        "LaunchDarkly API, SDK or mobile key after the name launchdarkly",
        &["launchdarkly"],
        "(?:api|sdk|mob)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[A-Za-z0-9=_-]{40}",
    ),
    row("linear-client-secret", "Linear OAuth client secret after the name linear", &["linear"], "[a-f0-9]{32}"),
    row(
        "linkedin-client-secret",
        "LinkedIn client secret after the name linkedin",
        &["linkedin", "linked_in", "linked-in"],
        "[A-Za-z0-9]{16}",
    ),
    row("looker-client-secret", "Looker API client secret after the name looker", &["looker"], "[A-Za-z0-9]{24}"),
    row(
        "mailgun-signing-key",
        "Mailgun webhook signing key after the name mailgun",
        &["mailgun"],
        "[a-f0-9]{32}-[a-f0-9]{8}-[a-f0-9]{8}",
    ),
    row("mattermost-token", "Mattermost access token after the name mattermost", &["mattermost"], "[a-z0-9]{26}"),
    row(
        "messagebird-api-key",
        "MessageBird (Bird) API key after the name messagebird",
        &["messagebird", "message_bird", "message-bird"],
        "[A-Za-z0-9]{25}",
    ),
    row("netlify-token", "Netlify access token after the name netlify", &["netlify"], "[A-Za-z0-9=_-]{40,46}"),
    row(
        "nytimes-api-key",
        "New York Times API key after the name nytimes",
        &["nytimes", "newyorktimes", "new_york_times", "new-york-times"],
        "[A-Za-z0-9=_-]{32}",
    ),
    row("plaid-secret", "Plaid secret after the name plaid", &["plaid"], "[a-z0-9]{30}"),
    row(
        "privateai-api-key",
        "Private AI API key after its name",
        &["privateai", "private_ai", "private-ai"],
        "[A-Za-z0-9]{32}",
    ),
    row("rapidapi-key", "RapidAPI key after the name rapidapi", &["rapidapi"], "[A-Za-z0-9_-]{50}"),
    row("sendbird-token", "Sendbird API token after the name sendbird", &["sendbird"], "[a-f0-9]{40}"),
    row("sentry-named-token", "Sentry auth token (64 hex) after the name sentry", &["sentry"], "[a-f0-9]{64}"),
    row("snyk-token", "Snyk API token (a UUID) after the name snyk", &["snyk"], UUID),
    row(
        "sonarqube-legacy-token",
        "SonarQube / SonarCloud 40-hex token after the name sonar",
        &["sonar"],
        "[a-f0-9]{40}",
    ),
    row(
        "sourcegraph-legacy-token",
        "Sourcegraph 40-hex access token after the name sourcegraph",
        &["sourcegraph"],
        "[a-f0-9]{40}",
    ),
    row("squarespace-token", "Squarespace API key (a UUID) after the name squarespace", &["squarespace"], UUID),
    row(
        "sumologic-credential",
        "Sumo Logic access id or key after the name sumo",
        &["sumo"],
        "[A-Za-z0-9]{64}|su[A-Za-z0-9]{12}",
    ),
    row("travisci-token", "Travis CI access token after the name travis", &["travis"], "[A-Za-z0-9_-]{22}"),
    row("twitch-token", "Twitch OAuth token or client secret after the name twitch", &["twitch"], "[a-z0-9]{30}"),
    Row {
        id: "twitter-credential",
        description: "Twitter (X) API key, secret, access token or bearer token after the name twitter",
        names: &["twitter"],
        value: "A{22}[A-Za-z0-9%]{80,100}|[0-9]{15,25}-[A-Za-z0-9]{20,40}|[A-Za-z0-9]{50}|[A-Za-z0-9]{45}|[A-Za-z0-9]{25}",
        raw: true,
    },
    row(
        "yandex-credential",
        "Yandex Cloud IAM token, API key or static access key after the name yandex",
        &["yandex"],
        r"t1\.[A-Za-z0-9_-]+={0,2}\.[A-Za-z0-9_-]{86}={0,2}|AQVN[A-Za-z0-9_-]{35,38}|YC[A-Za-z0-9_-]{38}",
    ),
    row("zendesk-api-token", "Zendesk API token after the name zendesk", &["zendesk"], "[A-Za-z0-9]{40}"),
];

/// The pattern skeleton: `name` (one of `names`, at the start of a word or after `_`: `consumo`
/// does not name Sumo, `MY_SUMO_KEY` does; written so that the regex keeps its literal prefix,
/// which the per-rule baseline of the leak benchmark needs to be a fair one), up to 24 more name characters, an optional
/// closing quote or bracket, `=`, `:`, `:=` or `=>`, an optional opening quote, then the value,
/// which must end there (a quote, blank, `;`, `,`, a bracket, an escaped newline or the end).
fn pattern(names: &[&str], value: &str) -> String {
    let names: Vec<String> = names.iter().map(|n| n.replace('.', r"\.")).collect();
    format!(
        r#"(?i)(?:\b|_)(?:{})[A-Za-z0-9_.-]{{0,24}}?["'\]]?[ \t]*(?:=>|:=|=|:)[ \t]*["'`]?(?-i:({}))(?:[\s"'`;,)\]}}]|\\[nr]|$)"#,
        names.join("|"),
        value
    )
}

/// The provider-named rules.
pub(crate) fn rules() -> impl Iterator<Item = Rule> {
    ROWS.iter().map(|r| {
        let pattern = pattern(r.names, r.value);
        Rule {
            id: r.id,
            description: r.description,
            severity: High,
            action: Redact,
            keywords: r.names,
            case_sensitive: false,
            matcher: Matcher::Regex {
                regex: compile(r.id, &pattern),
                pattern,
                before: 1,
                // Dropbox's short-lived tokens run to 1,500 characters; the rest fit in 400.
                after: if r.raw && r.id == "dropbox-token" { 1_700 } else { 400 },
                filter: Filter {
                    placeholder: !r.raw,
                    min_entropy: 3.0,
                    validate: None,
                    generic: false,
                    precheck: None,
                },
            },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_builds_and_names_are_lower_case() {
        let n = rules().count();
        assert_eq!(n, ROWS.len());
        for r in ROWS {
            assert!(r.names.iter().all(|n| *n == n.to_ascii_lowercase()), "{}", r.id);
        }
    }
}
