//! The HTTPS side of the one listener: the certificate (the administrator's own, or a
//! self-signed one created once on the data partition) and its SHA-256 fingerprint, which a
//! visitor compares with the one the kiosk shows before trusting it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

use crate::config::Config;

/// The server side of TLS, ready for the listener.
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    /// SHA-256 of the leaf certificate, as `AB:CD:…` (what browsers show).
    pub fingerprint: String,
}

/// Where the self-signed certificate and its key live when the configuration names none.
fn generated_paths(data_dir: &Path) -> (PathBuf, PathBuf) {
    let dir = data_dir.join("tls");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// Loads the configured certificate, or the self-signed one, creating it on first start.
pub fn load_or_create(config: &Config) -> anyhow::Result<Tls> {
    let (cert, key) = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        (None, None) => {
            let (cert, key) = generated_paths(&config.data_dir);
            if !cert.exists() || !key.exists() {
                create_self_signed(&cert, &key, &config.listen)?;
            }
            (cert, key)
        }
        _ => anyhow::bail!("tls_cert and tls_key must be set together"),
    };
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("cannot read certificate {}", cert.display()))?;
    let leaf = chain
        .first()
        .with_context(|| format!("no certificate in {}", cert.display()))?;
    let fingerprint = fingerprint_of(leaf);
    let private = PrivateKeyDer::from_pem_file(&key)
        .with_context(|| format!("cannot read private key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .context("the certificate does not match the key")?;
    // gRPC needs HTTP/2; browsers and curl pick either.
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Tls {
        config: Arc::new(server),
        fingerprint,
    })
}

/// The certificate's fingerprint as browsers print it.
pub fn fingerprint_of(cert: &CertificateDer<'_>) -> String {
    let digest = Sha256::digest(cert.as_ref());
    let hex: Vec<String> = digest.iter().map(|b| format!("{b:02X}")).collect();
    hex.join(":")
}

/// A self-signed certificate for `localhost`, the board's `.local` name and its addresses.
fn create_self_signed(
    cert: &Path,
    key: &Path,
    listen: &std::net::SocketAddr,
) -> anyhow::Result<()> {
    let mut names = vec!["localhost".to_string()];
    if let Some(host) = hostname() {
        names.push(format!("{host}.local"));
        names.push(host);
    }
    let mut params = rcgen::CertificateParams::new(names)?;
    let mut addresses = vec![
        std::net::IpAddr::from([127, 0, 0, 1]),
        std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
    ];
    addresses.extend(local_addresses(listen));
    addresses.sort();
    addresses.dedup();
    params
        .subject_alt_names
        .extend(addresses.into_iter().map(rcgen::SanType::IpAddress));
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "docent kiosk");
    // Long enough to outlive the kiosk; the board may boot with no clock set.
    params.not_before = rcgen::date_time_ymd(2024, 1, 1);
    params.not_after = rcgen::date_time_ymd(2099, 12, 31);
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let certificate = params.self_signed(&pair)?;
    let dir = cert.parent().context("certificate path has no directory")?;
    std::fs::create_dir_all(dir)?;
    write_private(key, pair.serialize_pem().as_bytes())?;
    std::fs::write(cert, certificate.pem())?;
    tracing::info!(path = %cert.display(), "created a self-signed TLS certificate");
    Ok(())
}

/// Writes the key readable by its owner only, atomically (a crash leaves no half key).
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    (!name.is_empty() && name != "localhost").then(|| name.to_string())
}

/// The board's own addresses: the listen address if it is a specific one, else the address of
/// the interface that routes outwards (found without sending anything).
fn local_addresses(listen: &std::net::SocketAddr) -> Vec<std::net::IpAddr> {
    if !listen.ip().is_unspecified() {
        return vec![listen.ip()];
    }
    let probe = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").map(|_| s))
        .and_then(|s| s.local_addr());
    probe.map(|a| vec![a.ip()]).unwrap_or_default()
}
