#!/usr/bin/env python3
"""Generates positives.txt for the leak-detector corpus.

Every secret here is random filler in the provider's public format, generated from a fixed
seed: none is or was a real credential. Where the format allows letters, the random part starts
with FAKE or fake so the values are obviously not real. Run from this directory:

    python3 generate.py > positives.txt

Records are separated by lines `### <rule-id>`; the text of a record follows until the next one.
"""

import base64
import random
import string

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
    "DATADOG_API_KEY=" + r(HEX, 32))

# --- Generic assignments in more languages and formats -----------------------------------------
add("generic-password", "services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: \"" + r(AN, 10) + "4\"",
    "spring.datasource.password=" + r(AN, 12) + "8")
add("generic-api-key", 'const API_KEY: &str = "' + r(AN, 28) + '5";', 'api_key: str = "' + r(AN, 30) + '1"',
    "const apiKey = '" + r(AN, 32) + "7';", '<add key="ApiKey" value="x" />\nApiKey=' + r(AN, 24) + "0")
add("generic-secret", "  client-secret: " + r(AN + "-_", 34) + "3", "Secret = \"" + r(HEX, 48) + "\"")
add("generic-token", "apiToken := \"" + r(AN, 36) + "2\"", 'refresh_token="' + r(AN + "-_.", 60) + '9"')

add("slack-webhook-url",
    '{"url": "https:\\/\\/hooks.slack.com\\/services\\/T' + r(UP + DG, 8) + "\\/B" + r(UP + DG, 10) + "\\/" + fake(AN, 24) + '"}')

for rule, text in records:
    print("### " + rule)
    print(text)
