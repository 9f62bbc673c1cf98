//! The HTTPS side of the one listener: the certificate (the administrator's own, or a
//! self-signed one created once on the data partition) and its SHA-256 fingerprint, which a
//! visitor compares with the one the kiosk shows before trusting it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};

use crate::config::Config;

/// The server side of TLS, ready for the listener. The certificate is behind a resolver that
/// an administrator's upload swaps: new handshakes use the new one at once, connections already
/// open keep theirs.
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    current: Arc<Current>,
    /// Where an uploaded certificate is written (the self-signed one's files), or `None` when
    /// the configuration names the files (they are the administrator's to manage then).
    uploads_to: Option<(PathBuf, PathBuf)>,
}

/// The certificate in use and its fingerprint.
#[derive(Debug)]
struct Current(RwLock<(Arc<CertifiedKey>, String)>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().expect("certificate lock").0.clone())
    }
}

/// Why an uploaded certificate was refused; nothing was replaced.
#[derive(Debug)]
pub enum Refused {
    /// The PEM does not parse, holds no certificate or key, or the key is not the certificate's.
    Invalid(String),
    /// The configuration names the certificate files: an upload would not survive a restart.
    Configured,
    /// It could not be written to the data partition.
    Io(std::io::Error),
}

/// Where the self-signed certificate and its key live when the configuration names none.
fn generated_paths(data_dir: &Path) -> (PathBuf, PathBuf) {
    let dir = data_dir.join("tls");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// Loads the configured certificate, or the self-signed one, creating it on first start.
pub fn load_or_create(config: &Config) -> anyhow::Result<Tls> {
    let (cert, key, uploads_to) = match (&config.access.tls_cert, &config.access.tls_key) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone(), None),
        (None, None) => {
            let (cert, key) = generated_paths(&config.data_dir);
            if !cert.exists() || !key.exists() {
                create_self_signed(&cert, &key, config)?;
            }
            (cert.clone(), key.clone(), Some((cert, key)))
        }
        _ => anyhow::bail!("access.tls_cert and access.tls_key must be set together"),
    };
    let read = || -> anyhow::Result<(Arc<CertifiedKey>, String)> {
        let cert_pem = std::fs::read(&cert)
            .with_context(|| format!("cannot read certificate {}", cert.display()))?;
        let key_pem = std::fs::read(&key)
            .with_context(|| format!("cannot read private key {}", key.display()))?;
        certified_key(&cert_pem, &key_pem)
            .map_err(|e| anyhow::anyhow!("{} and {}: {e}", cert.display(), key.display()))
    };
    let (certified, fingerprint) = match (read(), &uploads_to) {
        (Ok(pair), _) => pair,
        (Err(e), None) => return Err(e),
        // The kiosk's own files (a power cut between writing an upload's key and certificate):
        // a new self-signed pair keeps the console reachable.
        (Err(e), Some(_)) => {
            tracing::warn!("{e:#}; creating a new self-signed certificate");
            create_self_signed(&cert, &key, config)?;
            read()?
        }
    };
    let current = Arc::new(Current(RwLock::new((certified, fingerprint))));
    let mut server = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(current.clone());
    // gRPC needs HTTP/2; browsers and curl pick either.
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Tls {
        config: Arc::new(server),
        current,
        uploads_to,
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate chain and its private key from PEM, checked to belong together, with the
/// leaf's fingerprint.
fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<(Arc<CertifiedKey>, String), String> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the certificate is not valid PEM: {e}"))?;
    let leaf = chain.first().ok_or("no certificate in the PEM")?;
    let fingerprint = fingerprint_of(leaf);
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("the private key is not valid PEM: {e}"))?;
    let certified = CertifiedKey::from_der(chain, key, &provider())
        .map_err(|e| format!("the key does not fit the certificate: {e}"))?;
    // `from_der` lets a key whose public half it cannot derive pass; an upload must prove it.
    certified
        .keys_match()
        .map_err(|e| format!("the key does not fit the certificate: {e}"))?;
    Ok((Arc::new(certified), fingerprint))
}

impl Tls {
    /// SHA-256 of the leaf certificate in use, as `AB:CD:…` (what browsers show).
    pub fn fingerprint(&self) -> String {
        self.current.0.read().expect("certificate lock").1.clone()
    }

    /// Whether the certificate files are the configuration's (uploads refused).
    pub fn configured(&self) -> bool {
        self.uploads_to.is_none()
    }

    /// Replaces the certificate with the administrator's: checked first (parses, the key is the
    /// certificate's), then written over the self-signed one's files (key and certificate each
    /// renamed into place after fsync) and used for every new handshake; returns its
    /// fingerprint. A refused pair changes nothing.
    pub fn install(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<String, Refused> {
        let (cert_path, key_path) = self.uploads_to.as_ref().ok_or(Refused::Configured)?;
        let (certified, fingerprint) =
            certified_key(cert_pem, key_pem).map_err(Refused::Invalid)?;
        let mut current = self.current.0.write().expect("certificate lock");
        write_private(key_path, key_pem).map_err(Refused::Io)?;
        write_private(cert_path, cert_pem).map_err(Refused::Io)?;
        *current = (certified, fingerprint.clone());
        tracing::info!(%fingerprint, "installed the administrator's TLS certificate");
        Ok(fingerprint)
    }
}

/// The certificate's fingerprint as browsers print it.
pub fn fingerprint_of(cert: &CertificateDer<'_>) -> String {
    let digest = Sha256::digest(cert.as_ref());
    let hex: Vec<String> = digest.iter().map(|b| format!("{b:02X}")).collect();
    hex.join(":")
}

/// A self-signed certificate for `localhost`, the kiosk's mDNS name, the board's host name (and
/// its `.local`) and its addresses.
fn create_self_signed(cert: &Path, key: &Path, config: &Config) -> anyhow::Result<()> {
    let listen = &config.listen;
    let mut names = vec![
        "localhost".to_string(),
        format!("{}.local", super::mdns::host_name(config)),
    ];
    if let Some(host) = hostname() {
        names.push(format!("{host}.local"));
        names.push(host);
    }
    names.sort();
    names.dedup();
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

/// Writes the key (or certificate) readable by its owner only, atomically (a crash leaves no
/// half file).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
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
