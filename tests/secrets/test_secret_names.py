"""The one secret-name rule over 66 common credential names, and the ordinary names it must leave alone."""

from __future__ import annotations

import pytest

from nbflow._core.secrets import is_secret_name

# 66 credential names as users spell them (environment variables, parameters, config keys, headers).
CREDENTIAL_NAMES = [
    # model providers, `<provider>_key` and `<provider>_api_key`
    "OPENAI_API_KEY",
    "OPENAI_KEY",
    "openai_key",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_KEY",
    "AZURE_OPENAI_KEY",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "COHERE_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_KEY",
    "HF_TOKEN",
    "HUGGINGFACEHUB_API_TOKEN",
    "PINECONE_KEY",
    # code hosts, chat, packages: tokens and personal access tokens
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_PAT",
    "GITLAB_PAT",
    "SLACK_BOT_TOKEN",
    "SLACK_WEBHOOK_URL",
    "NPM_TOKEN",
    "PYPI_TOKEN",
    # clouds
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_STORAGE_CONNECTION_STRING",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "MY_SERVICE_CRED",
    "aws_creds",
    # databases
    "PGPASSWORD",
    "MYSQL_PWD",
    "MYSQL_ROOT_PASSWORD",
    "DB_PASS",
    "db_passwd",
    "DATABASE_URL",
    "database_url",
    "POSTGRES_DSN",
    "SENTRY_DSN",
    "REDIS_PASSWORD",
    # keys, signing, sessions
    "SSH_KEY",
    "ssh_private_key",
    "private_key",
    "JWT",
    "jwt",
    "JWT_SECRET",
    "SECRET_KEY",
    "SESSION_SECRET",
    "session_cookie",
    "ENCRYPTION_KEY",
    "SIGNING_KEY",
    "MASTER_KEY",
    # OAuth, HTTP
    "ACCESS_TOKEN",
    "refresh_token",
    "id_token",
    "BEARER",
    "Authorization",
    "X-API-Key",
    "apiKey",
    "CLIENT_SECRET",
    # payment, mail, other services
    "STRIPE_SECRET_KEY",
    "STRIPE_KEY",
    "SENDGRID_API_KEY",
    "TWILIO_AUTH_TOKEN",
]

# Names that hold no credential, though a part looks like one: a batch stores no secret-named column, so each of
# these would lose data if it counted.
ORDINARY_NAMES = [
    "max_tokens",
    "token_count",
    "prompt_tokens",
    "completion_tokens",
    "input_token_count",
    "tokens_used",
    "token_ids",
    "max_token",
    "keyword",
    "keywords",
    "key_points",
    "key",
    "keys",
    "primary_key",
    "sort_key",
    "cache_key",
    "s3_key",
    "object_key",
    "author",
    "tokenizer",
    "passage",
    "path",
    "pattern",
    "bypass",
    "compass",
    "first_pass",
    "url",
    "base_url",
    "OPENAI_BASE_URL",
    "api_base",
    "model",
    "temperature",
    "secretary",
    "monkey",
    "question",
    "answer",
    "patience",
    "key_value",
    "credit_limit",
    "credits",
    "incredible",
]


def test_there_are_66_credential_names():
    assert len(CREDENTIAL_NAMES) == 66 == len(set(CREDENTIAL_NAMES))


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_a_credential_name_is_secret(name):
    assert is_secret_name(name), name


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_an_ordinary_name_is_not_secret(name):
    assert not is_secret_name(name), name


@pytest.mark.parametrize("style", [str.upper, str.lower, lambda n: n.replace("_", "-")])
def test_the_rule_holds_in_every_case_style(style):
    for name in ("OPENAI_KEY", "GH_PAT", "DATABASE_URL", "SSH_KEY", "SENTRY_DSN"):
        assert is_secret_name(style(name)), style(name)
    assert is_secret_name("openaiKey") and is_secret_name("ghPat") and is_secret_name("databaseUrl")
