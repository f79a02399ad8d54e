#!/usr/bin/env python3
"""Generates positives.txt for the leak-detector corpus.

Every secret here is random filler in the provider's public format, generated from a fixed
seed: none is or was a real credential. Where the format allows letters, the random part starts
with FAKE or fake so the values are obviously not real. Run from this directory:

    python3 generate.py > positives.txt
    python3 generate.py near-misses > near_misses.txt

Records are separated by lines `### <rule-id>`; the text of a record follows until the next one.
"""

import base64
import random
import string
import sys

rng = random.Random(20261121)

UP = string.ascii_uppercase
LO = string.ascii_lowercase
DG = string.digits
AN = UP + LO + DG
HEX = "0123456789abcdef"
B64 = AN + "+/"
B64U = AN + "-_"
B32 = UP + "234567"


def r(alphabet, n):
    return "".join(rng.choice(alphabet) for _ in range(n))


def fake(alphabet, n, marker="FAKE"):
    """n random characters, starting with a FAKE marker when the alphabet has those letters."""
    if all(c in alphabet for c in marker) and n > len(marker) + 4:
        return marker + r(alphabet, n - len(marker))
    return r(alphabet, n)


def pem_body(nbytes):
    raw = bytes(rng.getrandbits(8) for _ in range(nbytes))
    b = base64.b64encode(raw).decode()
    return "\n".join(b[i : i + 64] for i in range(0, len(b), 64))


records = []


def add(rule, *texts):
    for t in texts:
        records.append((rule, t))


# --- Private keys ---------------------------------------------------------------------------
add("private-key",
    "-----BEGIN RSA PRIVATE KEY-----\n" + pem_body(600) + "\n-----END RSA PRIVATE KEY-----\n",
    "key.pem:\n-----BEGIN PRIVATE KEY-----\n" + pem_body(300) + "\n-----END PRIVATE KEY-----",
    "-----BEGIN EC PRIVATE KEY-----\n" + pem_body(120) + "\n-----END EC PRIVATE KEY-----",
    "-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + pem_body(200) + "\n-----END ENCRYPTED PRIVATE KEY-----",
    "$ cat id_rsa | head -5\n-----BEGIN RSA PRIVATE KEY-----\n" + pem_body(192))
add("openssh-private-key",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    + pem_body(280) + "\n-----END OPENSSH PRIVATE KEY-----\n")
add("pgp-private-key-block",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n" + pem_body(400)
    + "\n=" + r(B64, 4) + "\n-----END PGP PRIVATE KEY BLOCK-----")
add("putty-private-key",
    "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: fake-key\nPublic-Lines: 2\n"
    + pem_body(60) + "\nPrivate-Lines: 1\n" + base64.b64encode(bytes(rng.getrandbits(8) for _ in range(48))).decode()
    + "\nPrivate-MAC: " + r(HEX, 64) + "\n")
add("age-secret-key", "AGE-SECRET-KEY-1" + fake(UP + DG, 58), "# created: 2026-01-01\nAGE-SECRET-KEY-1" + r(UP + DG, 58))

# --- Cloud ----------------------------------------------------------------------------------
add("aws-access-key-id",
    "aws_access_key_id = AKIA" + fake(B32, 16),
    'export AWS_ACCESS_KEY_ID="ASIA' + r(B32, 16) + '"',
    "User ABIA" + r(B32, 16) + " is not authorized")
add("aws-secret-access-key",
    "aws_secret_access_key = FAKE" + r(AN + "+/", 36),
    'AWS_SECRET_ACCESS_KEY="' + r(AN + "+/", 40) + '"',
    '{"SecretAccessKey": "' + r(AN + "/+", 40) + '", "AccessKeyId": "ASIA' + r(B32, 16) + '"}')
add("aws-session-token", "aws_session_token = FwoGZXIvYXdzE" + r(AN + "/+", 300) + "==")
add("aws-mws-auth-token", "MWS_AUTH_TOKEN=amzn.mws." + "-".join(r(HEX, n) for n in (8, 4, 4, 4, 12)))
add("gcp-api-key", "const key = 'AIza" + fake(AN + "_-", 35) + "';", "https://maps.googleapis.com/maps/api/js?key=AIza" + r(AN, 35) + "&callback=init")
add("gcp-oauth-client-secret", '"client_secret": "GOCSPX-' + fake(AN + "_-", 28) + '"')
add("gcp-oauth-access-token", "Authorization: Bearer ya29.a0" + fake(AN + "_-", 150))
add("gcp-oauth-refresh-token", '"refresh_token": "1//0' + fake(AN + "_-", 100) + '"')
add("gcp-service-account-key",
    '{\n  "type": "service_account",\n  "project_id": "fake-project",\n  "private_key_id": "' + r(HEX, 40)
    + '",\n  "private_key": "-----BEGIN PRIVATE KEY-----\\n' + pem_body(600).replace("\n", "\\n")
    + '\\n-----END PRIVATE KEY-----\\n",\n  "client_email": "fake@fake-project.iam.gserviceaccount.com"\n}')
add("gcp-service-account-key-id", '{"type": "service_account", "private_key_id": "' + r(HEX, 40) + '"}')
add("azure-storage-account-key",
    "DefaultEndpointsProtocol=https;AccountName=fakeacct;AccountKey=" + r(B64, 86) + "==;EndpointSuffix=core.windows.net")
add("azure-shared-access-key",
    "Endpoint=sb://fake-bus.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="
    + r(B64, 43) + "=")
add("azure-sas-token",
    "https://fakeacct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=co&sp=rl&se=2026-12-31T00:00:00Z&sig="
    + r(AN, 40) + "%3D")
add("azure-ad-client-secret", "AZURE_CLIENT_SECRET=" + r(AN, 3) + "8Q~" + fake(AN + "_~.-", 34))
add("azure-devops-pat", "AZURE_DEVOPS_PAT=" + r(AN, 52) + "JQQJ99" + r(AN, 18) + "AZDO" + r(AN, 4))
add("digitalocean-token", "DIGITALOCEAN_TOKEN=dop_v1_" + r(HEX, 64), "doctl auth init -t dor_v1_" + r(HEX, 64))
add("alibaba-access-key-id", "ALIBABA_CLOUD_ACCESS_KEY_ID=LTAI" + fake(AN, 20))
add("databricks-token", "DATABRICKS_TOKEN=dapi" + r(HEX, 32), "token: dapi" + r(HEX, 32) + "-2")
add("hashicorp-vault-token", "VAULT_TOKEN=hvs." + fake(AN + "_-", 90), "Token: hvb." + r(AN, 130))
add("terraform-cloud-token", 'credentials "app.terraform.io" { token = "' + r(AN, 14) + ".atlasv1." + r(AN, 67) + '" }')
add("flyio-token", "FLY_API_TOKEN=fo1_" + fake(AN + "_-", 43), "FlyV1 fm2_" + r(B64, 300) + "==")
add("supabase-token", "SUPABASE_ACCESS_TOKEN=sbp_" + r(HEX, 40))
add("planetscale-token", "PLANETSCALE_SERVICE_TOKEN=pscale_tkn_" + fake(AN + "_", 43), "password: pscale_pw_" + r(AN, 43))
add("heroku-api-key", "HEROKU_API_KEY=HRKU-" + fake(AN + "_-", 60))
add("cloudflare-api-token", "CLOUDFLARE_API_TOKEN=" + fake(AN + "_", 40))
add("linear-api-key", "LINEAR_API_KEY=lin_api_" + fake(AN, 40))
add("postman-api-key", "x-api-key: PMAK-" + r(HEX, 24) + "-" + r(HEX, 34))
add("grafana-token", "GRAFANA_TOKEN=glsa_" + fake(AN, 32) + "_" + r(HEX, 8), "glc_" + fake(AN, 120) + "==")
add("newrelic-user-key", "NEW_RELIC_API_KEY=NRAK-" + fake(UP + DG, 27))
add("sentry-auth-token", "SENTRY_AUTH_TOKEN=sntrys_" + r(B64, 120) + "_" + r(AN, 43), "sntryu_" + r(HEX, 64))
add("sentry-dsn", 'dsn: "https://' + r(HEX, 32) + '@o123456.ingest.sentry.io/4505"')
add("doppler-token", "DOPPLER_TOKEN=dp.pt." + fake(AN, 43))
add("pulumi-token", "PULUMI_ACCESS_TOKEN=pul-" + r(HEX, 40))
add("atlassian-api-token", "JIRA_API_TOKEN=ATATT3xFfGF0" + fake(AN + "_-", 180) + "=" + r(HEX, 8).upper())
add("shopify-token", "SHOPIFY_ACCESS_TOKEN=shpat_" + r(HEX, 32), 'shared_secret: "shpss_' + r(HEX, 32) + '"')
add("tailscale-key", "TS_AUTHKEY=tskey-auth-k" + fake(AN, 11) + "-" + r(AN, 33))
add("dynatrace-token", "DT_API_TOKEN=dt0c01." + fake(UP + DG, 24) + "." + r(UP + DG, 64))
add("onepassword-service-token", "OP_SERVICE_ACCOUNT_TOKEN=ops_eyJ" + r(B64U, 400))

# --- Code hosts -----------------------------------------------------------------------------
add("github-pat-classic",
    "GITHUB_TOKEN=ghp_" + fake(AN, 36),
    "git clone https://ghp_" + r(AN, 36) + "@github.com/fake/repo.git",
    "remote: Invalid token ghp_" + r(AN, 36) + ".")
add("github-oauth-token", "oauth_token: gho_" + fake(AN, 36))
add("github-app-token", "GH_TOKEN=ghs_" + fake(AN, 36), "ghu_" + r(AN, 36))
add("github-refresh-token", "refresh_token=ghr_" + fake(AN, 76))
add("github-fine-grained-pat", "GITHUB_PAT=github_pat_11" + fake(AN, 20) + "_" + r(AN, 59))
add("gitlab-pat", "GITLAB_TOKEN=glpat-" + fake(AN + "_-", 20), "PRIVATE-TOKEN: glpat-" + r(AN, 27) + ".01.0w" + r(LO + DG, 7))
add("gitlab-runner-token", "token = \"glrt-" + fake(AN + "_-", 20) + "\"", "--registration-token GR1348941" + r(AN + "_-", 20))
add("gitlab-other-token", "trigger: glptt-" + r(HEX, 40), "DEPLOY_TOKEN=gldt-" + fake(AN, 20))
add("bitbucket-app-password", "BITBUCKET_APP_PASSWORD=ATBB" + fake(AN, 32))

# --- AI -------------------------------------------------------------------------------------
add("anthropic-api-key", "ANTHROPIC_API_KEY=sk-ant-api03-" + fake(AN + "_-", 93) + "AA",
    'client = Anthropic(api_key="sk-ant-admin01-' + r(AN + "_-", 93) + 'AA")')
add("openai-api-key", "OPENAI_API_KEY=sk-proj-" + fake(AN + "_-", 156),
    "openai.api_key = 'sk-" + r(AN, 20) + "T3BlbkFJ" + r(AN, 20) + "'",
    "Incorrect API key provided: sk-svcacct-" + r(AN + "_-", 64) + ".")
add("openrouter-api-key", "OPENROUTER_API_KEY=sk-or-v1-" + r(HEX, 64))
add("huggingface-token", "HF_TOKEN=hf_" + fake(UP + LO, 34), "huggingface-cli login --token hf_" + r(UP + LO, 34))
add("groq-api-key", "GROQ_API_KEY=gsk_" + fake(AN, 52))
add("replicate-api-token", "REPLICATE_API_TOKEN=r8_" + fake(AN, 37))
add("perplexity-api-key", "PPLX_API_KEY=pplx-" + fake(AN, 48))
add("xai-api-key", "XAI_API_KEY=xai-" + fake(AN, 80))
add("langsmith-api-key", "LANGCHAIN_API_KEY=lsv2_pt_" + r(HEX, 32) + "_" + r(HEX, 10))
add("nvidia-api-key", "NVIDIA_API_KEY=nvapi-" + fake(AN + "_-", 64))

# --- Payments -------------------------------------------------------------------------------
add("stripe-secret-key", "STRIPE_SECRET_KEY=sk_live_" + fake(AN, 99), "Stripe.api_key = 'rk_test_" + fake(AN, 24) + "'",
    "curl https://api.stripe.com/v1/charges -u sk_test_" + r(AN, 24) + ":")
add("stripe-webhook-secret", "STRIPE_WEBHOOK_SECRET=whsec_" + fake(AN, 32))
add("square-access-token", "SQUARE_ACCESS_TOKEN=EAAA" + fake(AN + "_-", 60), "sq0atp-" + r(AN + "_-", 22))
add("square-oauth-secret", "application_secret: sq0csp-" + fake(AN + "_-", 43))
add("braintree-access-token", "BRAINTREE_TOKEN=access_token$production$" + r(LO + DG, 16) + "$" + r(HEX, 32))
add("shippo-token", "SHIPPO_API_KEY=shippo_live_" + r(HEX, 40))
add("flutterwave-secret-key", "FLW_SECRET_KEY=FLWSECK_TEST-" + r(HEX, 32) + "-X")
add("easypost-api-key", "EASYPOST_API_KEY=EZAK" + fake(AN, 54))
add("duffel-token", "DUFFEL_ACCESS_TOKEN=duffel_test_" + fake(AN + "_-", 43))

# --- Messaging ------------------------------------------------------------------------------
add("slack-token",
    "SLACK_BOT_TOKEN=xoxb-" + r(DG, 12) + "-" + r(DG, 13) + "-" + fake(AN, 24),
    "xoxp-" + r(DG, 12) + "-" + r(DG, 12) + "-" + r(DG, 13) + "-" + r(HEX, 32))
add("slack-app-token", "SLACK_APP_TOKEN=xapp-1-A" + r(UP + DG, 10) + "-" + r(DG, 13) + "-" + r(HEX, 64))
add("slack-webhook-url",
    "SLACK_WEBHOOK=https://hooks.slack.com/services/T" + r(UP + DG, 8) + "/B" + r(UP + DG, 10) + "/" + fake(AN, 24))
add("twilio-api-key", "TWILIO_API_KEY=SK" + r(HEX, 32))
add("twilio-auth-token", "TWILIO_AUTH_TOKEN=" + r(HEX, 32))
add("sendgrid-api-key", "SENDGRID_API_KEY=SG." + fake(AN + "_-", 22) + "." + r(AN + "_-", 43))
add("mailgun-api-key", "MAILGUN_API_KEY=key-" + r(HEX, 32))
add("mailchimp-api-key", "MAILCHIMP_KEY=" + r(HEX, 32) + "-us21")
add("telegram-bot-token", "TELEGRAM_BOT_TOKEN=" + r(DG, 10) + ":AA" + fake(AN + "_-", 33),
    "https://api.telegram.org/bot" + r(DG, 9) + ":AA" + r(AN + "_-", 33) + "/getMe")
add("discord-bot-token", "DISCORD_TOKEN=M" + r(AN, 25) + "." + r(AN + "_-", 6) + "." + fake(AN + "_-", 38))
add("discord-webhook-url", "https://discord.com/api/webhooks/" + r(DG, 19) + "/" + fake(AN + "_-", 68))
add("teams-webhook-url",
    "https://fakeorg.webhook.office.com/webhookb2/" + "-".join(r(HEX, n) for n in (8, 4, 4, 4, 12)) + "@"
    + "-".join(r(HEX, n) for n in (8, 4, 4, 4, 12)) + "/IncomingWebhook/" + r(HEX, 32) + "/"
    + "-".join(r(HEX, n) for n in (8, 4, 4, 4, 12)))
add("firebase-fcm-server-key", "FCM_SERVER_KEY=AAAA" + r(AN + "_-", 7) + ":APA91b" + fake(AN + "_-", 134))
add("facebook-access-token", "FB_TOKEN=EAACEdEose0cBA" + fake(AN, 160))

# --- Registries and tools -------------------------------------------------------------------
add("npm-access-token", "NPM_TOKEN=npm_" + fake(AN, 36))
add("npmrc-auth-token", "//registry.npmjs.org/:_authToken=" + "-".join(r(HEX, n) for n in (8, 4, 4, 4, 12)))
add("pypi-token", "password = pypi-AgEIcHlwaS5vcmc" + fake(AN + "_-", 160))
add("rubygems-api-key", ":rubygems_api_key: rubygems_" + r(HEX, 48))
add("cratesio-api-token", "CARGO_REGISTRY_TOKEN=cio" + fake(AN, 32))
add("nuget-api-key", "dotnet nuget push x.nupkg --api-key oy2" + r(LO + DG, 43))
add("clojars-token", "CLOJARS_" + r(LO + DG, 60))
add("dockerhub-token", "DOCKERHUB_TOKEN=dckr_pat_" + fake(AN + "_-", 27))
add("docker-config-auth",
    '{"auths": {"https://index.docker.io/v1/": {"auth": "'
    + base64.b64encode(("fakeuser:" + r(AN, 20)).encode()).decode() + '"}}}')
add("jfrog-token", "ARTIFACTORY_API_KEY=AKCp" + fake(AN, 69))
add("contentful-token", "CONTENTFUL_MANAGEMENT_TOKEN=CFPAT-" + fake(AN + "_-", 43))
add("figma-token", "FIGMA_TOKEN=figd_" + fake(AN + "_-", 40))
add("notion-token", "NOTION_TOKEN=secret_" + fake(AN, 43), "ntn_" + r(DG, 11) + fake(AN, 35))
add("prefect-api-key", "PREFECT_API_KEY=pnu_" + fake(AN, 36))
add("readme-api-key", "README_API_KEY=rdme_" + r(LO + DG, 70))
add("mapbox-secret-token", "MAPBOX_SECRET=sk.eyJ1Ijoi" + r(B64U, 60) + "." + r(B64U, 22))
add("okta-api-token", "OKTA_API_TOKEN=00" + fake(AN + "_-", 40))

# --- Tokens and URLs ------------------------------------------------------------------------
def b64u(s):
    return base64.urlsafe_b64encode(s.encode()).decode().rstrip("=")


jwt = (b64u('{"alg":"RS256","typ":"JWT"}') + "." + b64u('{"sub":"fake-user-' + r(DG, 6) + '","iat":1767225600}')
       + "." + r(B64U, 86))
add("jwt", "Authorization: Bearer " + jwt, 'id_token: "' + jwt + '"', "cookie session=" + jwt + "; Path=/")
add("database-url-password",
    "DATABASE_URL=postgres://app:" + fake(AN, 20) + "@db.internal:5432/app",
    'mongodb+srv://svc:' + r(AN, 16) + '@cluster0.fake.mongodb.net/prod?retryWrites=true',
    "REDIS_URL=redis://:" + r(AN, 24) + "@cache:6379/0",
    "mysql://root:" + r(AN + "!#", 14) + "@127.0.0.1:3306/shop")
add("url-basic-auth", "proxy: http://proxyuser:" + fake(AN, 18) + "@proxy.corp.internal:3128",
    "Cloning into 'repo'... from https://deploy:" + r(AN, 20) + "@git.fake.internal/repo.git")
add("authorization-bearer", "curl -H 'Authorization: Bearer " + fake(AN, 40) + "' https://api.fake.internal/v1")
add("authorization-basic", "Authorization: Basic " + base64.b64encode(("admin:" + r(AN, 16)).encode()).decode())
add("netrc-password", "machine api.fake.internal login deploy password " + fake(AN, 20))

# --- Generic assignments ---------------------------------------------------------------------
add("generic-password", "DB_PASSWORD=" + r(AN, 6) + "#" + r(DG, 4), 'password: "' + r(AN, 12) + '9"',
    "  smtp_passwd = " + r(AN, 10) + "7")
add("generic-secret", 'JWT_SECRET="' + r(AN, 32) + '"', "client_secret: " + r(HEX, 32),
    'app.config["SECRET_KEY"] = "' + r(AN + "!@#%^*", 40) + '2"')
add("generic-token", "SERVICE_TOKEN=" + r(AN, 40), '"access_token": "' + r(AN + "-_.", 48) + '"',
    "auth_token := \"" + r(AN, 30) + "1\"")
add("generic-api-key", "API_KEY=" + r(AN, 32) + "9", "x-api-key: " + r(HEX, 40), 'apiKey: "' + r(AN, 24) + '3",',
    "STATUSPAGE_API_KEY=" + r(HEX, 32))

# --- Generic assignments in more languages and formats -----------------------------------------
add("generic-password", "services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: \"" + r(AN, 10) + "4\"",
    "spring.datasource.password=" + r(AN, 12) + "8")
add("generic-api-key", 'const API_KEY: &str = "' + r(AN, 28) + '5";', 'api_key: str = "' + r(AN, 30) + '1"',
    "const apiKey = '" + r(AN, 32) + "7';", '<add key="ApiKey" value="x" />\nApiKey=' + r(AN, 24) + "0")
add("generic-secret", "  client-secret: " + r(AN + "-_", 34) + "3", "Secret = \"" + r(HEX, 48) + "\"")
add("generic-token", "apiToken := \"" + r(AN, 36) + "2\"", 'refresh_token="' + r(AN + "-_.", 60) + '9"')

# --- Formats added from gitleaks' rule list (each value is random filler) ----------------------
UUIDF = lambda: "-".join(r(HEX, n) for n in (8, 4, 4, 4, 12))
add("onepassword-secret-key", "1Password secret key: A3-" + r(UP + DG, 6) + "-" + r(UP + DG, 11) + "-" + "-".join(r(UP + DG, 5) for _ in range(3)))
add("adobe-client-secret", "ADOBE_CLIENT_SECRET=p8e-" + fake(AN, 32))
add("airtable-pat", "AIRTABLE_TOKEN=pat" + r(AN, 14) + "." + r(HEX, 64))
add("authress-access-key", "AUTHRESS_KEY=sc_" + r(LO + DG, 12) + "." + r(LO + DG, 5) + ".acc_" + r(LO + DG, 16) + "." + r(B64, 60))
add("aws-bedrock-api-key", "AWS_BEARER_TOKEN_BEDROCK=ABSK" + fake(B64, 132),
    "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t" + r(B64, 300))
add("clickhouse-cloud-key", "CLICKHOUSE_KEY_SECRET=4b1d" + r(AN, 38))
add("cloudflare-origin-ca-key", "CF_ORIGIN_CA_KEY=v1.0-" + r(HEX, 24) + "-" + r(HEX, 146))
add("defined-networking-token", "DN_API_KEY=dnkey-" + r(AN, 26) + "-" + r(AN, 52))
add("flutterwave-encryption-key", "FLW_ENCRYPTION_KEY=FLWSECK_TEST" + r(HEX, 12))
add("frameio-api-token", "FRAMEIO_TOKEN=fio-u-" + fake(AN + "_-", 64))
add("gitlab-session-cookie", "Cookie: _gitlab_session=" + r(LO + DG, 32) + "; path=/")
add("harness-api-key", "HARNESS_API_KEY=pat." + r(AN, 22) + "." + r(AN, 24) + "." + r(AN, 20))
add("hubspot-private-app-token", "HUBSPOT_ACCESS_TOKEN=pat-na1-" + UUIDF())
add("infracost-api-token", "INFRACOST_API_KEY=ico-" + fake(AN, 32))
add("intra42-client-secret", "FT_SECRET=s-s4t2ud-" + r(HEX, 64))
add("jwt-base64", "token: " + base64.b64encode(jwt.encode()).decode())
add("lob-api-key", "LOB_API_KEY=test_" + r(HEX, 35), "lob.secret: live_" + r(HEX, 35))
add("maxmind-license-key", "MAXMIND_LICENSE_KEY=" + r(AN, 6) + "_" + r(AN, 29) + "_mmk")
add("netlify-pat", "NETLIFY_AUTH_TOKEN=nfp_" + fake(AN, 36))
add("newrelic-insert-key", "NEW_RELIC_INSERT_KEY=NRII-" + fake(AN, 32))
add("nuget-config-password", '<packageSourceCredentials><feed><add key="Username" value="ci" />\n<add key="ClearTextPassword" value="' + r(AN, 20) + '7" /></feed>')
add("octopus-deploy-api-key", "OCTOPUS_API_KEY=API-" + r(UP + DG, 26))
add("openshift-user-token", "oc login --token=sha256~" + r(AN + "_-", 43))
add("plaid-access-token", "PLAID_ACCESS_TOKEN=access-sandbox-" + UUIDF())
add("scalingo-api-token", "SCALINGO_API_TOKEN=tk-us-" + fake(AN + "_-", 48))
add("brevo-api-key", "BREVO_API_KEY=xkeysib-" + r(HEX, 64) + "-" + r(AN, 16))
add("settlemint-token", "SETTLEMINT_ACCESS_TOKEN=sm_pat_" + r(AN, 16))
add("sidekiq-secret", "BUNDLE_ENTERPRISE__CONTRIBSYS__COM=" + r(HEX, 8) + ":" + r(HEX, 8),
    'source "https://' + r(HEX, 8) + ":" + r(HEX, 8) + '@gems.contribsys.com/"')
add("sonarqube-token", "SONAR_TOKEN=squ_" + r(HEX, 40))
add("sourcegraph-token", "SRC_ACCESS_TOKEN=sgp_" + r(HEX, 16) + "_" + r(HEX, 40))
add("typeform-token", "TYPEFORM_TOKEN=tfp_" + fake(AN + "_", 59))
add("curl-user-password", "curl -s -u deploy:" + fake(AN, 18) + " https://api.fake.internal/v1/items")

# Provider-named values: the provider's name, then a value of its shape.
for rule, *texts in [
    ("adafruit-api-key", "ADAFRUIT_IO_KEY=aio_" + r(AN, 28)),
    ("airtable-api-key", "AIRTABLE_API_KEY=key" + r(AN, 14)),
    ("algolia-api-key", "ALGOLIA_ADMIN_KEY=" + r(AN, 32)),
    ("alibaba-secret-key", "ALIBABA_CLOUD_ACCESS_KEY_SECRET=" + r(AN, 30)),
    ("asana-client-secret", "asana_client_secret: " + r(AN, 32)),
    ("atlassian-legacy-token", "JIRA_API_TOKEN=" + r(AN, 24)),
    ("beamer-api-key", "BEAMER_API_KEY=b_" + r(AN + "_-", 44)),
    ("bitbucket-client-secret", "BITBUCKET_CLIENT_SECRET=" + r(AN + "_-", 64)),
    ("bittrex-api-key", "bittrex_secret = '" + r(AN, 32) + "'"),
    ("cisco-meraki-api-key", "MERAKI_DASHBOARD_API_KEY=" + r(HEX, 40)),
    ("codecov-token", "CODECOV_TOKEN=" + UUIDF()),
    ("cohere-api-key", "CO_API_KEY=" + r(AN, 40)),
    ("coinbase-token", "coinbase_access_token: " + r(AN + "_-", 64)),
    ("confluent-api-key", "CONFLUENT_CLOUD_API_SECRET=" + r(AN + "+/", 64)),
    ("contentful-delivery-token", "CONTENTFUL_DELIVERY_TOKEN=" + r(AN + "_-", 43)),
    ("datadog-api-key", "DD_API_KEY=" + r(HEX, 32), "DATADOG_APP_KEY: " + r(HEX, 40)),
    ("discord-client-secret", "DISCORD_CLIENT_SECRET=" + r(AN + "_-", 32)),
    ("droneci-token", "DRONE_TOKEN=" + r(AN, 32)),
    ("dropbox-token", "DROPBOX_ACCESS_TOKEN=sl." + r(AN + "_-", 140)),
    ("etsy-api-key", "ETSY_API_KEY=" + r(AN, 24)),
    ("facebook-app-secret", "FACEBOOK_APP_SECRET=" + r(HEX, 32)),
    ("facebook-app-access-token", "facebook_access_token = '" + r(DG, 15) + "|" + r(AN + "_-", 30) + "'"),
    ("fastly-api-token", "FASTLY_API_TOKEN=" + r(AN + "_-", 32)),
    ("finicity-credential", "FINICITY_APP_KEY=" + r(HEX, 32)),
    ("finnhub-api-key", "FINNHUB_API_KEY=" + r(LO + DG, 20)),
    ("flickr-api-key", "FLICKR_KEY=" + r(AN, 32)),
    ("freshbooks-token", "FRESHBOOKS_TOKEN=" + r(AN, 64)),
    ("gitter-token", "GITTER_TOKEN=" + r(AN + "_-", 40)),
    ("gocardless-token", "GOCARDLESS_ACCESS_TOKEN=live_" + r(AN + "_-", 40)),
    ("hashicorp-vault-legacy-token", "VAULT_TOKEN=s." + r(AN, 24)),
    ("heroku-legacy-api-key", "HEROKU_API_KEY=" + UUIDF()),
    ("hubspot-api-key", "hubspot_api_key: " + UUIDF()),
    ("intercom-token", "INTERCOM_ACCESS_TOKEN=" + r(AN + "_-", 60)),
    ("jfrog-identity-token", "JFROG_ACCESS_TOKEN=" + r(AN, 64)),
    ("kraken-api-key", "KRAKEN_PRIVATE_KEY=" + r(B64, 88)),
    ("kucoin-credential", "KUCOIN_API_SECRET=" + UUIDF()),
    ("launchdarkly-token", "LAUNCHDARKLY_SDK_KEY=sdk-" + UUIDF()),
    ("linear-client-secret", "LINEAR_CLIENT_SECRET=" + r(HEX, 32)),
    ("linkedin-client-secret", "LINKEDIN_CLIENT_SECRET=" + r(AN, 16)),
    ("looker-client-secret", "LOOKERSDK_CLIENT_SECRET=" + r(AN, 24)),
    ("mailgun-signing-key", "MAILGUN_WEBHOOK_SIGNING_KEY=" + r(HEX, 32) + "-" + r(HEX, 8) + "-" + r(HEX, 8)),
    ("mattermost-token", "MATTERMOST_TOKEN=" + r(LO + DG, 26)),
    ("messagebird-api-key", "MESSAGEBIRD_API_KEY=" + r(AN, 25)),
    ("netlify-token", "NETLIFY_AUTH_TOKEN=" + r(AN + "_-", 43)),
    ("nytimes-api-key", "NYTIMES_API_KEY=" + r(AN, 32)),
    ("plaid-secret", "PLAID_SECRET=" + r(LO + DG, 30)),
    ("privateai-api-key", "PRIVATE_AI_API_KEY=" + r(AN, 32)),
    ("rapidapi-key", "X_RAPIDAPI_KEY=" + r(AN + "_-", 50)),
    ("sendbird-token", "SENDBIRD_API_TOKEN=" + r(HEX, 40)),
    ("sentry-named-token", "SENTRY_TOKEN=" + r(HEX, 64)),
    ("snyk-token", "SNYK_TOKEN=" + UUIDF()),
    ("sonarqube-legacy-token", "sonar.login=" + r(HEX, 40)),
    ("sourcegraph-legacy-token", "SOURCEGRAPH_TOKEN=" + r(HEX, 40)),
    ("squarespace-token", "SQUARESPACE_API_KEY=" + UUIDF()),
    ("sumologic-credential", "SUMO_ACCESS_KEY=" + r(AN, 64), "SUMO_ACCESS_ID=su" + r(AN, 12)),
    ("travisci-token", "TRAVIS_TOKEN=" + r(AN + "_-", 22)),
    ("twitch-token", "TWITCH_CLIENT_SECRET=" + r(LO + DG, 30)),
    ("twitter-credential", "TWITTER_API_SECRET=" + r(AN, 50), "twitter_access_token: " + r(DG, 19) + "-" + r(AN, 40),
     "TWITTER_BEARER_TOKEN=" + "A" * 22 + r(AN, 90)),
    ("yandex-credential", "YANDEX_API_KEY=AQVN" + r(AN + "_-", 36)),
    ("zendesk-api-token", "ZENDESK_API_TOKEN=" + r(AN, 40)),
]:
    add(rule, *texts)

# Generic assignments of the shapes the issue named: *_SECRET_KEY, *_API_KEY, *_TOKEN, *PASSWORD*, *_SECRET.
add("generic-secret", "DJANGO_SECRET_KEY='django-insecure-" + r(LO + DG + "!@#%^&*(-_=+)", 50) + "'",
    'STORAGE_ACCOUNT_SECRET="' + r(AN + "+/", 44) + '"')
add("generic-api-key", "export MODEL_API_KEY=" + r(AN, 40), "AZURE_STORAGE_ACCOUNT_KEY: " + r(AN, 44),
    'ALGOLIA_KEY_FOR_TESTS = "' + r(AN, 20) + '"', "TYPESENSE_API_KEY=" + r(AN, 32))
add("generic-token", "AWS_SECURITY_TOKEN=" + r(AN, 48), 'challengeToken: "' + r(AN + "-_", 32) + '"',
    "CI_JOB_TOKEN=" + r(AN, 20))
add("generic-secret", "'secret_key' => 'sk_" + r(AN, 29) + "',")  # Freemius' PHP config
add("generic-password", "MYSQL_ROOT_PASSWORD=" + r(AN, 14), "PGPASSWORD='" + r(AN + "(&)!", 16) + "'",
    'hashicorp_admin_password = "' + r(AN, 12) + '"')

add("slack-webhook-url",
    '{"url": "https:\\/\\/hooks.slack.com\\/services\\/T' + r(UP + DG, 8) + "\\/B" + r(UP + DG, 10) + "\\/" + fake(AN, 24) + '"}')

# Kubernetes Secrets: as written by hand (kind first) and as `kubectl get secret -o yaml` prints them.
add("kubernetes-secret-yaml",
    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-credentials\n  namespace: prod\ntype: Opaque\ndata:\n"
    "  username: YWRtaW4=\n  password: " + base64.b64encode(fake(AN, 24).encode()).decode() + "\n",
    "apiVersion: v1\ndata:\n  tls.crt: " + r(B64, 40) + "==\n  tls.key: " + r(B64, 64) + "\nkind: Secret\n"
    "metadata:\n  creationTimestamp: \"2026-01-01T00:00:00Z\"\n  name: web-tls\ntype: kubernetes.io/tls\n")

# --- Near misses: `python3 generate.py near-misses > near_misses.txt` --------------------------
# One or more per rule: text of the rule's shape that it must NOT report (too short, wrong
# alphabet, wrong prefix case, a placeholder, the provider's name missing, a public key, ...).
def near_misses():
    global rng
    rng = random.Random(20261123)
    U = lambda: "-".join(r(HEX, n) for n in (8, 4, 4, 4, 12))
    n = []

    def miss(rule, *texts):
        for t in texts:
            n.append((rule, t))

    miss("private-key", "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----", "-----BEGIN PUBLIC KEY-----\n" + pem_body(200) + "\n-----END PUBLIC KEY-----")
    miss("openssh-private-key", 'if line.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----") { return Kind::OpenSsh; }')
    miss("pgp-private-key-block", "-----BEGIN PGP PUBLIC KEY BLOCK-----\n" + pem_body(200) + "\n-----END PGP PUBLIC KEY BLOCK-----")
    miss("putty-private-key", "PuTTY-User-Key-File-3: ssh-ed25519\nPublic-Lines: 2\n" + pem_body(60))
    miss("age-secret-key", "AGE-SECRET-KEY-1" + r(UP + DG, 40), "age1" + r(LO + DG, 58))
    miss("aws-access-key-id", "AKIA" + r(B32, 12), "akia" + r(B32.lower(), 16), "AKIAIOSFODNN7EXAMPLE")
    miss("aws-secret-access-key", "aws_secret_access_key = " + r(AN, 30), "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    miss("aws-session-token", "aws_session_token = " + r(AN, 60))
    miss("aws-mws-auth-token", "amzn.mws." + r(HEX, 8))
    miss("gcp-api-key", "AIza" + r(AN, 20), "AIzaSy" + "x" * 33)
    miss("gcp-oauth-client-secret", "GOCSPX-" + r(AN, 10))
    miss("gcp-oauth-access-token", "ya29." + r(AN, 10))
    miss("gcp-oauth-refresh-token", "1//0" + r(AN, 10), "1//0" + r(AN, 50) + "/docs/page")
    miss("gcp-service-account-key", '"private_key": "",')
    miss("gcp-service-account-key-id", '"private_key_id": "' + r(HEX, 20) + '"')
    miss("azure-storage-account-key", "AccountKey=" + r(B64, 40) + "==")
    miss("azure-shared-access-key", "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=")
    miss("azure-sas-token", "sig=" + r(AN, 40) + " without sv=")
    miss("azure-ad-client-secret", r(AN, 3) + "8Q~" + r(AN, 10))
    miss("azure-devops-pat", r(AN, 40) + "JQQJ99" + r(AN, 10))
    miss("digitalocean-token", "dop_v1_" + r(HEX, 40), "dop_v1_" + r(UP, 64))
    miss("alibaba-access-key-id", "LTAI" + r(AN, 10))
    miss("databricks-token", "dapi" + r(HEX, 20), "dapicall()")
    miss("hashicorp-vault-token", "hvs." + r(AN, 10))
    miss("terraform-cloud-token", r(AN, 14) + ".atlasv1." + r(AN, 20))
    miss("flyio-token", "fo1_" + r(AN, 20))
    miss("supabase-token", "sbp_" + r(HEX, 20))
    miss("planetscale-token", "pscale_tkn_" + r(AN, 10))
    miss("heroku-api-key", "HRKU-" + r(AN, 10))
    miss("cloudflare-api-token", "CLOUDFLARE_API_TOKEN=" + r(AN, 20), "cloudflare_zone_id = " + r(HEX, 32))
    miss("linear-api-key", "lin_api_" + r(AN, 20))
    miss("postman-api-key", "PMAK-" + r(HEX, 24))
    miss("grafana-token", "glsa_" + r(AN, 10), "glc_" + r(AN, 10))
    miss("newrelic-user-key", "NRAK-" + r(UP + DG, 10))
    miss("sentry-auth-token", "sntryu_" + r(HEX, 20))
    miss("sentry-dsn", "https://o123456.ingest.sentry.io/4505")
    miss("doppler-token", "dp.pt." + r(AN, 10))
    miss("pulumi-token", "pul-" + r(HEX, 20))
    miss("atlassian-api-token", "ATATT3" + r(AN, 40))
    miss("shopify-token", "shpat_" + r(HEX, 20), "shpat_" + r(UP, 32))
    miss("tailscale-key", "tskey-auth-" + r(AN, 4))
    miss("dynatrace-token", "dt0c01." + r(UP + DG, 24) + "." + r(UP + DG, 10))
    miss("onepassword-service-token", "ops_eyJ" + r(B64U, 40))
    miss("github-pat-classic", "ghp_" + r(AN, 35), "GHP_" + r(AN, 36), "ghp_" + r(AN, 37))
    miss("github-oauth-token", "gho_" + r(AN, 20))
    miss("github-app-token", "ghs_" + r(AN, 20))
    miss("github-refresh-token", "ghr_" + r(AN, 20))
    miss("github-fine-grained-pat", "github_pat_" + r(AN, 22))
    miss("gitlab-pat", "glpat-" + r(AN, 10))
    miss("gitlab-runner-token", "glrt-" + r(AN, 10), "GR1348941" + r(AN, 5))
    miss("gitlab-other-token", "gldt-" + r(AN, 10), "glffct-" + r(AN, 8))
    miss("bitbucket-app-password", "ATBB" + r(AN, 10))
    miss("anthropic-api-key", "sk-ant-api03-" + r(AN, 20), "sk-ant-api03-" + "x" * 93 + "AA")
    miss("openai-api-key", "sk-proj-" + r(AN, 20), "sk-" + r(AN, 48))
    miss("openrouter-api-key", "sk-or-v1-" + r(HEX, 20))
    miss("huggingface-token", "hf_" + r(AN, 10), 'hf_hub_download(repo_id="bert-base-uncased")')
    miss("groq-api-key", "gsk_" + r(AN, 20))
    miss("replicate-api-token", "r8_" + r(AN, 20))
    miss("perplexity-api-key", "pplx-" + r(AN, 20))
    miss("xai-api-key", "xai-" + r(AN, 20))
    miss("langsmith-api-key", "lsv2_pt_" + r(HEX, 32))
    miss("nvidia-api-key", "nvapi-" + r(AN, 20))
    miss("stripe-secret-key", "sk_live_" + r(AN, 10), "pk_live_" + r(AN, 24), "sk_test_4eC39HqLyjWDarjtT1zdp7dc")
    miss("stripe-webhook-secret", "whsec_" + r(AN, 10))
    miss("square-access-token", "sq0atp-" + r(AN, 10), "EAAA" + r(AN, 20))
    miss("square-oauth-secret", "sq0csp-" + r(AN, 10))
    miss("braintree-access-token", "access_token$production$" + r(LO + DG, 16))
    miss("shippo-token", "shippo_live_" + r(HEX, 20))
    miss("flutterwave-secret-key", "FLWSECK_TEST-" + r(HEX, 20) + "-X", "FLWPUBK_TEST-" + r(HEX, 32) + "-X")
    miss("easypost-api-key", "EZAK" + r(AN, 20))
    miss("duffel-token", "duffel_test_" + r(AN, 10))
    miss("slack-token", "xoxb-", "xoxb-not-a-real-token-this-will-not-work", "xoxb-" + r(AN, 5))
    miss("slack-app-token", "xapp-1-" + r(UP + DG, 10))
    miss("slack-webhook-url", "https://hooks.slack.com/services/")
    miss("twilio-api-key", "SK" + r(HEX, 20), "SK" + r(UP + DG, 32))
    miss("twilio-auth-token", "TWILIO_AUTH_TOKEN=" + r(HEX, 20))
    miss("sendgrid-api-key", "SG." + r(AN, 22))
    miss("mailgun-api-key", "key-" + r(HEX, 20), "key-value store")
    miss("mailchimp-api-key", r(HEX, 20) + "-us21")
    miss("telegram-bot-token", r(DG, 10) + ":AA" + r(AN, 10))
    miss("discord-bot-token", "DISCORD_CHANNEL=" + r(DG, 18))
    miss("discord-webhook-url", "https://discord.com/api/webhooks/" + r(DG, 19) + "/")
    miss("teams-webhook-url", "https://fakeorg.webhook.office.com/webhookb2/")
    miss("firebase-fcm-server-key", "AAAA" + r(AN, 7) + ":APA91b" + r(AN, 20))
    miss("facebook-access-token", "EAAC" + r(AN, 40), "EAACEdEose0cBA")
    miss("npm-access-token", "npm_" + r(AN, 20), "npm_config_registry=https://registry.npmjs.org/")
    miss("npmrc-auth-token", "//registry.npmjs.org/:_authToken=${NPM_TOKEN}")
    miss("pypi-token", "pypi-AgEIcHlwaS5vcmc" + r(AN, 20))
    miss("rubygems-api-key", "rubygems_" + r(HEX, 20))
    miss("cratesio-api-token", "cio" + r(AN, 20), "ciOS" + r(AN, 32))
    miss("nuget-api-key", "oy2" + r(LO + DG, 20))
    miss("clojars-token", "CLOJARS_" + r(LO + DG, 20))
    miss("dockerhub-token", "dckr_pat_" + r(AN, 10))
    miss("docker-config-auth", '{"auth": "' + base64.b64encode(b"no colon here at all").decode() + '"}')
    miss("jfrog-token", "AKCp" + r(AN, 20))
    miss("contentful-token", "CFPAT-" + r(AN, 20))
    miss("figma-token", "figd_" + r(AN, 20))
    miss("notion-token", "secret_" + r(AN, 20), "ntn_" + r(DG, 5))
    miss("prefect-api-key", "pnu_" + r(AN, 20))
    miss("readme-api-key", "rdme_" + r(LO + DG, 20))
    miss("mapbox-secret-token", "pk.eyJ1Ijoi" + r(B64U, 60) + "." + r(B64U, 22))
    miss("okta-api-token", "OKTA_API_TOKEN=" + r(AN, 20))
    miss("onepassword-secret-key", "A3-" + r(UP + DG, 6) + "-" + r(UP + DG, 5))
    miss("adobe-client-secret", "p8e-" + r(AN, 20))
    miss("airtable-pat", "pat" + r(AN, 14) + "." + r(HEX, 20), "path." + r(HEX, 64))
    miss("authress-access-key", "sc_" + r(LO, 8) + ".acc_" + r(LO, 4))
    miss("aws-bedrock-api-key", "ABSK" + r(B64, 40))
    miss("clickhouse-cloud-key", "4b1d" + r(AN, 20), "4b1d" + "0" * 38)
    miss("cloudflare-origin-ca-key", "v1.0-" + r(HEX, 24))
    miss("defined-networking-token", "dnkey-" + r(AN, 10))
    miss("flutterwave-encryption-key", "FLWSECK_TEST" + r(HEX, 6))
    miss("frameio-api-token", "fio-u-" + r(AN, 20))
    miss("gitlab-session-cookie", "_gitlab_session=" + r(LO + DG, 10))
    miss("harness-api-key", "pat." + r(AN, 22) + "." + r(AN, 5), "compat." + r(AN, 22) + "." + r(AN, 24) + "." + r(AN, 20))
    miss("hubspot-private-app-token", "pat-na1-" + r(HEX, 8))
    miss("infracost-api-token", "ico-" + r(AN, 10), "favicon-" + r(AN, 32))
    miss("intra42-client-secret", "s-s4t2ud-" + r(HEX, 20))
    miss("jwt-base64", "ZXlK" + r(AN, 80), base64.b64encode(b'{"alg":"none"}' * 6).decode())
    miss("lob-api-key", "TEST_RESULT=test_" + r(HEX, 35), "LOB_API_KEY=test_" + r(HEX, 20))
    miss("maxmind-license-key", r(AN, 6) + "_" + r(AN, 10) + "_mmk")
    miss("netlify-pat", "nfp_" + r(AN, 20))
    miss("newrelic-insert-key", "NRII-" + r(AN, 10))
    miss("nuget-config-password", '<add key="ClearTextPassword" value="%NUGET_PASSWORD%" />', '<add key="Username" value="' + r(AN, 20) + '" />')
    miss("octopus-deploy-api-key", "API-" + r(UP + DG, 10), "API-REFERENCE-GUIDE")
    miss("openshift-user-token", "sha256~" + r(AN, 10), "sha256:" + r(HEX, 64))
    miss("plaid-access-token", "access-sandbox-" + r(HEX, 8))
    miss("scalingo-api-token", "tk-us-" + r(AN, 10))
    miss("brevo-api-key", "xkeysib-" + r(HEX, 20))
    miss("settlemint-token", "sm_pat_" + r(AN, 5))
    miss("sidekiq-secret", "BUNDLE_ENTERPRISE__CONTRIBSYS__COM=${SIDEKIQ_CREDS}", "https://gems.contribsys.com/")
    miss("sonarqube-token", "squ_" + r(HEX, 20))
    miss("sourcegraph-token", "sgp_" + r(HEX, 20))
    miss("typeform-token", "tfp_" + r(AN, 20))
    miss("curl-user-password", "curl -u $USER:$PASSWORD https://api.fake.internal", "curl -u admin:changeme http://localhost:8080")
    miss("jwt", "eyJhbGciOiJIUzI1NiJ9", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
    miss("database-url-password", "DATABASE_URL=postgres://user:password@localhost:5432/mydb", "redis://:${REDIS_PASSWORD}@redis:6379")
    miss("url-basic-auth", "https://user:pass@example.com/", "see https://docs.fake.internal/a:b@c")
    miss("authorization-bearer", "Authorization: Bearer <token>", "Authorization: Bearer $GITHUB_TOKEN")
    miss("authorization-basic", "Authorization: Basic " + base64.b64encode(b"nocolonhere").decode())
    miss("netrc-password", "machine api.fake.internal login deploy password changeme")
    miss("generic-password", 'password = "changeme"', "password: ${DB_PASSWORD}", "password_min_length = 12", "DB_PASSWORD=<your-password-here>")
    miss("generic-secret", "secret_name = my-app-secrets-v2", "client_secret={{ .Values.clientSecret }}", "JWT_SECRET=xxxxxxxxxxxxxxxxxxxxxxxx")
    miss("generic-token", "max_tokens = 4096", 'token_type = "bearer"', "GITHUB_TOKEN=${GITHUB_TOKEN}", "next_page_token = " + r(AN, 32))
    miss("generic-api-key", "API_KEY=your-api-key-here", "public_key = " + r(AN, 40), "keyboard_layout = us-intl-2", "cache_key = \"user:1234:profile\"")
    # Provider-named rules: the value's shape without the provider's name, and the name with a value
    # half as long.
    for rule, shape, name in [
        ("adafruit-api-key", "aio_" + r(AN, 28), "ADAFRUIT_IO_KEY"),
        ("airtable-api-key", "key" + r(AN, 14), "AIRTABLE_API_KEY"),
        ("algolia-api-key", r(AN, 32), "ALGOLIA_ADMIN_KEY"),
        ("alibaba-secret-key", r(AN, 30), "ALIBABA_CLOUD_ACCESS_KEY_SECRET"),
        ("asana-client-secret", r(AN, 32), "ASANA_CLIENT_SECRET"),
        ("atlassian-legacy-token", r(AN, 24), "JIRA_API_TOKEN"),
        ("beamer-api-key", "b_" + r(AN, 44), "BEAMER_API_KEY"),
        ("bitbucket-client-secret", r(AN, 64), "BITBUCKET_CLIENT_SECRET"),
        ("bittrex-api-key", r(AN, 32), "BITTREX_SECRET"),
        ("cisco-meraki-api-key", r(HEX, 40), "MERAKI_DASHBOARD_API_KEY"),
        ("codecov-token", U(), "CODECOV_TOKEN"),
        ("cohere-api-key", r(AN, 40), "CO_API_KEY"),
        ("coinbase-token", r(AN, 64), "COINBASE_ACCESS_TOKEN"),
        ("confluent-api-key", r(AN, 64), "CONFLUENT_CLOUD_API_SECRET"),
        ("contentful-delivery-token", r(AN, 43), "CONTENTFUL_DELIVERY_TOKEN"),
        ("datadog-api-key", r(HEX, 32), "DD_API_KEY"),
        ("discord-client-secret", r(AN, 32), "DISCORD_CLIENT_SECRET"),
        ("droneci-token", r(AN, 32), "DRONE_TOKEN"),
        ("dropbox-token", "sl." + r(AN, 140), "DROPBOX_ACCESS_TOKEN"),
        ("etsy-api-key", r(AN, 24), "ETSY_API_KEY"),
        ("facebook-app-secret", r(HEX, 32), "FACEBOOK_APP_SECRET"),
        ("facebook-app-access-token", r(DG, 15) + "|" + r(AN, 30), "FACEBOOK_ACCESS_TOKEN"),
        ("fastly-api-token", r(AN, 32), "FASTLY_API_TOKEN"),
        ("finicity-credential", r(HEX, 32), "FINICITY_APP_KEY"),
        ("finnhub-api-key", r(LO + DG, 20), "FINNHUB_API_KEY"),
        ("flickr-api-key", r(AN, 32), "FLICKR_KEY"),
        ("freshbooks-token", r(AN, 64), "FRESHBOOKS_TOKEN"),
        ("gitter-token", r(AN, 40), "GITTER_TOKEN"),
        ("gocardless-token", "live_" + r(AN, 40), "GOCARDLESS_ACCESS_TOKEN"),
        ("hashicorp-vault-legacy-token", "s." + r(AN, 24), "VAULT_TOKEN"),
        ("heroku-legacy-api-key", U(), "HEROKU_API_KEY"),
        ("hubspot-api-key", U(), "HUBSPOT_API_KEY"),
        ("intercom-token", r(AN, 60), "INTERCOM_ACCESS_TOKEN"),
        ("jfrog-identity-token", r(AN, 64), "JFROG_ACCESS_TOKEN"),
        ("kraken-api-key", r(B64, 88), "KRAKEN_PRIVATE_KEY"),
        ("kucoin-credential", U(), "KUCOIN_API_SECRET"),
        ("launchdarkly-token", "sdk-" + U(), "LAUNCHDARKLY_SDK_KEY"),
        ("linear-client-secret", r(HEX, 32), "LINEAR_CLIENT_SECRET"),
        ("linkedin-client-secret", r(AN, 16), "LINKEDIN_CLIENT_SECRET"),
        ("looker-client-secret", r(AN, 24), "LOOKERSDK_CLIENT_SECRET"),
        ("mailgun-signing-key", r(HEX, 32) + "-" + r(HEX, 8) + "-" + r(HEX, 8), "MAILGUN_WEBHOOK_SIGNING_KEY"),
        ("mattermost-token", r(LO + DG, 26), "MATTERMOST_TOKEN"),
        ("messagebird-api-key", r(AN, 25), "MESSAGEBIRD_API_KEY"),
        ("netlify-token", r(AN, 43), "NETLIFY_AUTH_TOKEN"),
        ("nytimes-api-key", r(AN, 32), "NYTIMES_API_KEY"),
        ("plaid-secret", r(LO + DG, 30), "PLAID_SECRET"),
        ("privateai-api-key", r(AN, 32), "PRIVATE_AI_API_KEY"),
        ("rapidapi-key", r(AN, 50), "X_RAPIDAPI_KEY"),
        ("sendbird-token", r(HEX, 40), "SENDBIRD_API_TOKEN"),
        ("sentry-named-token", r(HEX, 64), "SENTRY_TOKEN"),
        ("snyk-token", U(), "SNYK_TOKEN"),
        ("sonarqube-legacy-token", r(HEX, 40), "SONAR_TOKEN"),
        ("sourcegraph-legacy-token", r(HEX, 40), "SOURCEGRAPH_TOKEN"),
        ("squarespace-token", U(), "SQUARESPACE_API_KEY"),
        ("sumologic-credential", r(AN, 64), "SUMO_ACCESS_KEY"),
        ("travisci-token", r(AN, 22), "TRAVIS_TOKEN"),
        ("twitch-token", r(LO + DG, 30), "TWITCH_CLIENT_SECRET"),
        ("twitter-credential", r(AN, 50), "TWITTER_API_SECRET"),
        ("yandex-credential", "AQVN" + r(AN, 36), "YANDEX_API_KEY"),
        ("zendesk-api-token", r(AN, 40), "ZENDESK_API_TOKEN"),
    ]:
        # (Half of Bitbucket's 64 or Twitter's 50 is another of their lengths: 3 short instead.)
        cut = len(shape) - 3 if rule in ("bitbucket-client-secret", "twitter-credential") else len(shape) // 2
        miss(rule, "build_ref = " + shape, name + "=" + shape[:cut])
    miss("twitter-credential", "twitter: https://twitter.com/" + r(AN, 25))
    miss("kubernetes-secret-yaml",
         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  blob: " + r(B64, 40) + "\n",
         "apiVersion: v1\nkind: Secret\nmetadata:\n  name: empty\ndata:\n  username: YWRtaW4=\n  password: \"\"\n",
         "apiVersion: v1\nkind: Secret\nmetadata:\n  name: hand\nstringData:\n  config.yaml: |\n    url: https://example.com\n")
    return n


if len(sys.argv) > 1 and sys.argv[1] == "near-misses":
    records = near_misses()

for rule, text in records:
    print("### " + rule)
    print(text)
