//! TLS termination: loading the certificate and key into a rustls acceptor.

use super::*;

/// Loads the PEM files off the async threads.
pub(super) async fn load_tls(files: TlsFiles) -> Result<TlsAcceptor, ListenerError> {
    let cert = files.cert.clone();
    tokio::task::spawn_blocking(move || tls_acceptor(&files))
        .await
        .map_err(|e| ListenerError::Tls {
            what: "cert",
            path: cert,
            detail: e.to_string(),
        })?
}

/// The rustls acceptor for the PEM files (blocking: reads the files).
pub(super) fn tls_acceptor(files: &TlsFiles) -> Result<TlsAcceptor, ListenerError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    let cert_error = |detail: String| ListenerError::Tls {
        what: "cert",
        path: files.cert.clone(),
        detail,
    };
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| cert_error(e.to_string()))?;
    if certs.is_empty() {
        return Err(cert_error("no certificate in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| ListenerError::Tls {
        what: "key",
        path: files.key.clone(),
        detail: e.to_string(),
    })?;
    // ring builds here without cmake or nasm; rustls deprecates it only because it offers no
    // post-quantum key exchange (the handshake uses X25519 or P-256 ECDHE).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| cert_error(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| cert_error(format!("does not match the key: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
