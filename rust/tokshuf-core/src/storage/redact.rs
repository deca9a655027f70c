//! Credentials masked in any text that may hold a URL or a store's words: every message of this
//! crate and of the Python package passes through [`redact`].

use std::borrow::Cow;

/// `text` with credentials masked as `***`: the `user:password@` of URLs; the values of signed
/// URLs' and headers' secrets (`X-Amz-Signature=`, `X-Amz-Credential=`, `X-Amz-Security-Token=`,
/// `Signature=`, `Credential=`, `sig=`, `x-amz-security-token:`, `Authorization:`, ...); and the
/// values of the credential variables of the environment (`AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AZURE_STORAGE_ACCOUNT_KEY`, ...) wherever they appear.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    if out.contains("://") {
        out = Cow::Owned(userinfo(&out));
    }
    if let Some(masked) = parameters(&out) {
        out = Cow::Owned(masked);
    }
    for secret in secret_values() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), MASK));
        }
    }
    out
}

const MASK: &str = "***";

/// Ends a URL's authority, or a secret's value.
fn ends_value(c: char) -> bool {
    c.is_whitespace() || matches!(c, '&' | ',' | ';' | '"' | '\'' | '<' | '>' | '\\' | ')' | '`')
}

/// Every `scheme://user:password@host` as `scheme://***@host` (but Hadoop's Azure URLs,
/// `abfss://container@account...`, whose `container@` is no credential).
fn userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = at + 3;
        out.push_str(&rest[..start]);
        let scheme_start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let container = matches!(&rest[scheme_start..at], "abfs" | "abfss" | "wasb" | "wasbs");
        let tail = &rest[start..];
        let end = tail.find(|c: char| ends_value(c) || matches!(c, '/' | '?' | '#')).unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@').filter(|_| !container) {
            Some(user_end) => {
                out.push_str(MASK);
                out.push_str(&authority[user_end..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Names whose `name=value` value is a secret (query parameters of signed URLs, SAS tokens,
/// configuration), compared case-insensitively. The first [`HEADERS`] are also headers, whose
/// `name: value` value is a secret.
const SECRET_PARAMETERS: [&str; 14] = [
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-credential",
    "x-goog-signature",
    "x-goog-credential",
    "authorization",
    "signature",
    "credential",
    "sig",
    "password",
    "secret",
    "token",
    "aws_secret_access_key",
    "aws_session_token",
];
const HEADERS: usize = 6;

/// `text` with the values of secret parameters and headers masked, if it has any.
fn parameters(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    // (start, end) of each value to mask, in the text's byte offsets (ASCII lowercasing keeps them).
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    for (i, name) in SECRET_PARAMETERS.iter().enumerate() {
        let header = i < HEADERS;
        let mut from = 0;
        while let Some(found) = lower[from..].find(name) {
            let at = from + found;
            from = at + name.len();
            if at > 0 && word(lower.as_bytes()[at - 1]) {
                continue;
            }
            let after = &text[from..];
            let separator = after.trim_start_matches(' ');
            let skip = after.len() - separator.len();
            let value_start = match separator.chars().next() {
                Some('=') => from + skip + 1,
                Some(':') if header => from + skip + 1,
                _ => continue,
            };
            let value = &text[value_start..];
            let lead = value.len() - value.trim_start_matches(' ').len();
            let value_start = value_start + lead;
            // An Authorization header's value is the rest of the line ("Basic dXNlcjpwYXNz").
            let end = if *name == "authorization" {
                text[value_start..].find(['\n', '\r', '"', '<']).map_or(text.len(), |e| value_start + e)
            } else {
                text[value_start..].find(ends_value).map_or(text.len(), |e| value_start + e)
            };
            if end > value_start && &text[value_start..end] != MASK {
                spans.push((value_start, end));
            }
        }
    }
    if spans.is_empty() {
        return None;
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in spans {
        if start < at {
            // Inside a span already masked (an Authorization line holding Signature=...).
            at = at.max(end);
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(MASK);
        at = end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// The values of the environment's credential variables (of AWS, Google Cloud and Azure: names
/// that hold KEY, SECRET, TOKEN, PASSWORD, SAS or CREDENTIAL), at least 8 characters long.
fn secret_values() -> Vec<String> {
    const PROVIDERS: [&str; 6] = ["AWS_", "GOOGLE_", "GCS_", "GCP_", "AZURE_", "AZURITE_"];
    const SECRET: [&str; 6] = ["KEY", "SECRET", "TOKEN", "PASSWORD", "SAS", "CREDENTIAL"];
    let mut values: Vec<String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, v)| {
            let k = k.to_ascii_uppercase();
            v.len() >= 8 && PROVIDERS.iter().any(|p| k.starts_with(p)) && SECRET.iter().any(|s| k.contains(s))
        })
        .map(|(_, v)| v)
        .collect();
    // Longest first: a value that holds another is masked whole.
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_user_and_password() {
        assert_eq!(redact("http://u:pw@host:8080/a/b.jsonl"), "http://***@host:8080/a/b.jsonl");
        assert_eq!(
            redact("see 'https://tok@h/x' and s3://bucket/key@v.jsonl"),
            "see 'https://***@h/x' and s3://bucket/key@v.jsonl"
        );
        assert_eq!(redact("plain text, no URL"), "plain text, no URL");
        assert!(matches!(redact("/local/path.jsonl"), Cow::Borrowed(_)));
        let azure = "abfss://fs@acct.dfs.core.windows.net/d/x.bin";
        assert_eq!(redact(azure), azure);
    }

    #[test]
    fn signed_urls_and_headers_lose_their_secrets() {
        let url = "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F2024&\
                   X-Amz-Signature=abc123&X-Amz-Security-Token=FQoG&x-id=GetObject";
        assert_eq!(
            redact(url),
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***&\
             X-Amz-Signature=***&X-Amz-Security-Token=***&x-id=GetObject"
        );
        let canonical = "GET /k\nhost:h\nx-amz-security-token:FQoGZXIvYXdz\nx-amz-date:2024";
        assert_eq!(redact(canonical), "GET /k\nhost:h\nx-amz-security-token:***\nx-amz-date:2024");
        let auth = "Authorization: AWS4-HMAC-SHA256 Credential=AKID/x, SignedHeaders=host, Signature=ff\nnext";
        assert_eq!(redact(auth), "Authorization: ***\nnext");
        assert_eq!(redact("sv=2022&sig=a%2Bb&se=2030"), "sv=2022&sig=***&se=2030");
        // Words that merely contain a name are left alone.
        let code = "<Code>SignatureDoesNotMatch</Code> continuation-token=x design=y";
        assert_eq!(redact(code), code);
    }
}
