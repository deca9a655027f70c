//! Object stores by URL: `s3://bucket/key` (and S3-compatible stores), `gs://`, `az://`, and
//! `http(s)://` servers, through the `object_store` crate.
//!
//! Credentials and endpoints come the standard way and are never logged: the providers' own
//! environment variables (`AWS_ACCESS_KEY_ID`, `AWS_REGION`, `AWS_ENDPOINT_URL` for MinIO, Ceph
//! or R2, `AWS_SKIP_SIGNATURE=true` for a public bucket, `GOOGLE_APPLICATION_CREDENTIALS`,
//! `AZURE_STORAGE_ACCOUNT_NAME`, ...), then, for S3, the shared credentials and config files of
//! `AWS_PROFILE` (default `default`), then the instance's role. Failed requests (throttling,
//! 5xx, dropped connections) are retried with exponential backoff for up to
//! `TOKSHUF_STORAGE_RETRY_SECONDS` (default 180), which also bounds how long a request may wait
//! for an answer ([`super::failure`] makes the retries).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::list::PaginatedListStore;
use object_store::multipart::MultipartStore;
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, ObjectStore, RetryConfig};

use crate::error::{Error, Result};

/// The URL schemes of object stores.
pub const SCHEMES: [&str; 10] = ["s3", "s3a", "gs", "gcs", "az", "azure", "abfs", "abfss", "http", "https"];

/// Whether `s` names an object in a store rather than a local path: whether it is a URL,
/// `scheme://...` with RFC 3986's scheme characters, at least two of them (so that `C://x` stays
/// a path). This is the one place paths and URLs are told apart; a URL whose scheme has no store
/// here (`hf://`, `ftp://`, `file://`) is refused by [`resolve`], naming the schemes there are,
/// instead of being taken for a local path that "does not exist" (or, as an output, created as
/// `./hf:/...`).
pub fn is_remote(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once("://") else { return false };
    let mut chars = scheme.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    first && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) && scheme.len() >= 2
}

/// An object (or a prefix of objects) in a store.
#[derive(Clone)]
pub struct Remote {
    /// The URL it was named by, for messages.
    pub url: String,
    pub store: Arc<dyn ObjectStore>,
    /// The same store's multipart uploads part by part (so each request can be retried), where
    /// it has them (not an http(s) server).
    pub(crate) multipart: Option<Arc<dyn MultipartStore>>,
    /// The same store's listing page by page (so a key it cannot name can be passed over).
    pub(crate) pages: Option<Arc<dyn PaginatedListStore>>,
    /// Its key in the store.
    pub key: Key,
    /// The process whose store this is: a forked child (a DataLoader worker) cannot use its
    /// parent's, whose pooled connections belong to the parent's runtime ([`Remote::here`]).
    pid: u32,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&super::redact(&self.url))
    }
}

impl Remote {
    /// The object `name` below this prefix (`prefix/name`).
    pub fn child(&self, name: &str) -> Remote {
        let key = if self.key.as_ref().is_empty() { name.to_string() } else { format!("{}/{name}", self.key) };
        self.with_key(Key::from(key))
    }

    /// The object `key` of the same store. Its URL escapes `%` (as `%25`): [`resolve`] reads a
    /// URL's `%XX` as an escape, so a listed key such as `a%20b.jsonl` resolves to itself.
    pub fn with_key(&self, key: Key) -> Remote {
        let base = self.url.split_once("://").map_or("", |(s, _)| s);
        let bucket = self.url.split_once("://").and_then(|(_, r)| r.split('/').next()).unwrap_or("");
        let path = key.as_ref().replace('%', "%25");
        Remote { url: format!("{base}://{bucket}/{path}"), key, ..self.clone() }
    }

    /// This object with a store of this process: itself, or in a process forked since it was
    /// resolved, the same URL resolved again.
    pub fn here(&self) -> Result<Remote> {
        if self.pid == std::process::id() {
            return Ok(self.clone());
        }
        resolve(&self.url)
    }
}

/// A store's interfaces: objects, and where it has them, multipart uploads and paged listings.
#[derive(Clone)]
struct Backend {
    store: Arc<dyn ObjectStore>,
    multipart: Option<Arc<dyn MultipartStore>>,
    pages: Option<Arc<dyn PaginatedListStore>>,
}

impl Backend {
    fn of<S: ObjectStore + MultipartStore + PaginatedListStore>(store: S) -> Backend {
        let store = Arc::new(store);
        Backend { store: store.clone(), multipart: Some(store.clone()), pages: Some(store) }
    }
}

type Stores = HashMap<String, Backend>;

/// The store and key a URL names (stores are made once per bucket and process, and shared).
pub fn resolve(url: &str) -> Result<Remote> {
    static STORES: Mutex<Option<(u32, Stores)>> = Mutex::new(None);
    let bad = |why: &str| Error::invalid(format!("{:?} is not a valid storage URL: {why}", super::redact(url)));
    let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
    if !SCHEMES.contains(&scheme) {
        return Err(Error::invalid(format!(
            "unsupported scheme {scheme} in {url:?} (supported: s3, gs, az, http, https; local files are given by \
             their path, not as file:// URLs)"
        )));
    }
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(bad("no bucket or host"));
    }
    let key = Key::from_url_path(key).map_err(|e| bad(&e.to_string()))?;
    let id = format!("{scheme}://{bucket}");
    let pid = std::process::id();
    let mut slot = STORES.lock().unwrap_or_else(|e| e.into_inner());
    if slot.as_ref().is_none_or(|(owner, _)| *owner != pid) {
        if let Some((_, parents)) = slot.replace((pid, HashMap::new())) {
            // The parent's clients: their connections' tasks ran on a runtime this process
            // does not have; never drop them (as the runtime itself, see runtime.rs).
            std::mem::forget(parents);
        }
    }
    let stores = &mut slot.as_mut().expect("set above").1;
    let backend = match stores.get(&id) {
        Some(b) => b.clone(),
        None => {
            let b = build(scheme, bucket)
                .map_err(|e| Error::invalid(super::redact(&format!("cannot open {id}: {e}")).into_owned()))?;
            stores.insert(id, b.clone());
            b
        }
    };
    let Backend { store, multipart, pages } = backend;
    Ok(Remote { url: url.to_string(), store, multipart, pages, key, pid })
}

/// How long a request may go without progress, its retries and the wait for an answer
/// included: `TOKSHUF_STORAGE_RETRY_SECONDS`, default 180, at least 0.1 (a request needs some
/// time to be answered at all).
pub(crate) fn retry_time() -> Duration {
    let seconds = std::env::var("TOKSHUF_STORAGE_RETRY_SECONDS").ok().and_then(|s| s.parse::<f64>().ok());
    Duration::from_secs_f64(seconds.filter(|s| s.is_finite()).unwrap_or(180.0).clamp(0.1, 86_400.0))
}

/// The client makes each request once: every retry is made by the storage layer
/// ([`super::failure::within_budget`]), which sees each failure, bounds the whole wait by the
/// budget, and so can report the last real cause (a 503, a dropped connection) when it gives up.
fn retry() -> RetryConfig {
    RetryConfig { backoff: BackoffConfig::default(), max_retries: 0, retry_timeout: retry_time() }
}

/// Timeouts, on top of what the environment configures: a connection that stalls is dropped
/// and the request retried.
const TIMEOUTS: [(ClientConfigKey, &str); 2] =
    [(ClientConfigKey::ConnectTimeout, "10 seconds"), (ClientConfigKey::Timeout, "120 seconds")];

/// TLS through rustls with ring's primitives, installed as rustls' process-wide default before
/// the first store builds its HTTP client (reqwest, built without a provider of its own, takes
/// the default). If one is installed already, it stays.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn build(scheme: &str, bucket: &str) -> Result<Backend, object_store::Error> {
    install_crypto_provider();
    Ok(match scheme {
        "s3" | "s3a" => {
            let b = AmazonS3Builder::from_env().with_bucket_name(bucket);
            let mut b = TIMEOUTS.into_iter().fold(b, |b, (k, v)| b.with_config(AmazonS3ConfigKey::Client(k), v));
            for (key, value) in aws_profile() {
                if std::env::var(key.to_ascii_uppercase()).is_err() {
                    if let Ok(k) = key.parse::<AmazonS3ConfigKey>() {
                        b = b.with_config(k, value);
                    }
                }
            }
            // A local MinIO or Ceph is usually plain http; boto3 and the AWS CLI accept such an
            // endpoint as given, so do the same rather than demand AWS_ALLOW_HTTP as well.
            let endpoint = std::env::var("AWS_ENDPOINT_URL_S3").or_else(|_| std::env::var("AWS_ENDPOINT_URL"));
            if endpoint.is_ok_and(|e| e.starts_with("http://")) {
                b = b.with_allow_http(true);
            }
            Backend::of(b.with_retry(retry()).build()?)
        }
        "gs" | "gcs" => {
            let b = GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket);
            let b = TIMEOUTS.into_iter().fold(b, |b, (k, v)| b.with_config(GoogleConfigKey::Client(k), v));
            Backend::of(b.with_retry(retry()).build()?)
        }
        "az" | "azure" | "abfs" | "abfss" => {
            // object_store parses the container (and, in `abfss://fs@account.dfs.core.windows.net`,
            // Hadoop's form, the account) from the URL.
            let b = MicrosoftAzureBuilder::from_env().with_url(format!("{scheme}://{bucket}"));
            let b = TIMEOUTS.into_iter().fold(b, |b, (k, v)| b.with_config(AzureConfigKey::Client(k), v));
            Backend::of(b.with_retry(retry()).build()?)
        }
        _ => {
            let options = ClientOptions::new().with_allow_http(scheme == "http");
            let options = TIMEOUTS.into_iter().fold(options, |o, (k, v)| o.with_config(k, v));
            let store = HttpBuilder::new()
                .with_url(format!("{scheme}://{bucket}"))
                .with_retry(retry())
                .with_client_options(options)
                .build()?;
            Backend { store: Arc::new(store), multipart: None, pages: None }
        }
    })
}

/// `(option, value)` pairs of the shared AWS files for `AWS_PROFILE` (default `default`):
/// the credentials file's keys and secrets, the config file's region and endpoint.
fn aws_profile() -> Vec<(String, String)> {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let credentials =
        std::env::var_os("AWS_SHARED_CREDENTIALS_FILE").map_or_else(|| home.join(".aws/credentials"), PathBuf::from);
    let config = std::env::var_os("AWS_CONFIG_FILE").map_or_else(|| home.join(".aws/config"), PathBuf::from);
    let mut out = Vec::new();
    let wanted = [
        ("aws_access_key_id", "access_key_id"),
        ("aws_secret_access_key", "secret_access_key"),
        ("aws_session_token", "session_token"),
        ("region", "region"),
        ("endpoint_url", "endpoint"),
    ];
    for (file, section) in [(credentials, profile.clone()), (config, format!("profile {profile}"))] {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let mut inside = false;
        for line in text.lines().map(str::trim) {
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                let name = name.trim();
                inside = name == section || (section == "profile default" && name == "default");
                continue;
            }
            if let (true, Some((k, v))) = (inside, line.split_once('=')) {
                if let Some(&(_, key)) = wanted.iter().find(|(name, _)| *name == k.trim()) {
                    out.push((format!("aws_{key}"), v.trim().to_string()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_schemes() {
        assert!(is_remote("s3://bucket/key") && is_remote("gs://b/x") && is_remote("https://host/path"));
        assert!(!is_remote("/data/file.jsonl") && !is_remote("file.jsonl") && !is_remote("C://x"));
        assert!(!is_remote("dir/a://b") && !is_remote("://x"));
        // Any URL is one, so that one without a store is refused by name, never taken for a path.
        for url in ["hf://datasets/x/y.parquet", "ftp://x/y", "file:///data/x.jsonl"] {
            assert!(is_remote(url), "{url}");
            let err = resolve(url).unwrap_err().to_string();
            let scheme = url.split("://").next().unwrap();
            assert!(err.contains(&format!("unsupported scheme {scheme}")) && err.contains("s3, gs, az"), "{err}");
        }
        let r = resolve("s3://bucket/dir/a%20b.jsonl").unwrap();
        assert_eq!(r.key.as_ref(), "dir/a b.jsonl");
        assert_eq!(r.with_key(Key::from("other/x")).url, "s3://bucket/other/x");
        assert!(resolve("s3:///key").is_err());
    }
}
