//! Email over SMTP with STARTTLS (lettre): TLS is required, never optional, so a server (or
//! a machine in the middle) that does not offer STARTTLS gets no message and no password.

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::{ChannelConfig, Outgoing, SendError};

/// The subject when the caller gives none.
pub(crate) const DEFAULT_SUBJECT: &str = "Message from toolgate";

/// Whether `address` is one mailbox (`name@host`, no display name, no list).
pub(crate) fn address_ok(address: &str) -> bool {
    address.parse::<lettre::Address>().is_ok()
}

/// Sends `m` to `m.address` through the channel's SMTP server.
pub(crate) async fn send(c: &ChannelConfig, password: Option<&str>, m: &Outgoing<'_>) -> Result<(), SendError> {
    let host = c.host.as_deref().unwrap_or_default();
    let from: Mailbox = c
        .from
        .as_deref()
        .unwrap_or_default()
        .parse()
        .map_err(|e| SendError::permanent(format!("`from` is not an address: {e}")))?;
    let to: Mailbox =
        m.address.parse().map_err(|e| SendError::permanent(format!("`{}` is not an address: {e}", m.address)))?;
    let email = Message::builder()
        .from(from)
        .to(to)
        .subject(m.subject.unwrap_or(DEFAULT_SUBJECT))
        .message_id(Some(format!("<{}@toolgate>", m.id)))
        .header(ContentType::TEXT_PLAIN)
        .body(m.content.to_owned())
        .map_err(|e| SendError::permanent(format!("building the email: {e}")))?;
    let mut tls = TlsParameters::builder(host.to_owned());
    if let Some(path) = &c.ca_file {
        let pem = std::fs::read(path)
            .map_err(|e| SendError::permanent(format!("cannot read the channel's ca_file {}: {e}", path.display())))?;
        let cert = Certificate::from_pem(&pem)
            .map_err(|e| SendError::permanent(format!("ca_file {} is not a PEM certificate: {e}", path.display())))?;
        tls = tls.add_root_certificate(cert);
    }
    let tls = tls.build_rustls().map_err(|e| SendError::permanent(format!("TLS setup: {e}")))?;
    let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
        .port(c.port.unwrap_or(587))
        .tls(Tls::Required(tls))
        .timeout(Some(m.timeout));
    if let (Some(user), Some(password)) = (&c.username, password) {
        transport = transport.credentials(Credentials::new(user.clone(), password.to_owned()));
    }
    let transport = transport.build();
    match transport.send(email).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_permanent() => Err(SendError::permanent(format!("the SMTP server refused the message: {e}"))),
        // A certificate that does not verify will not verify on the next try either (lettre
        // reports it as a connection error, hence the look at the causes).
        Err(e) if e.is_tls() || describe(&e).contains("certificate") => Err(SendError::permanent(format!(
            "STARTTLS with {host} failed: {} (a private CA goes in the channel's `ca_file`)",
            describe(&e)
        ))),
        Err(e) => Err(SendError::transient(format!("SMTP with {host}: {}", describe(&e)))),
    }
}

/// lettre's error with its causes (the outer one often says only "Connection error").
fn describe(e: &lettre::transport::smtp::Error) -> String {
    // Each level often repeats the one below it: keep the words once.
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut cur: &dyn std::error::Error = e;
    while let Some(next) = cur.source() {
        let text = next.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = next;
    }
    parts.join(": ")
}
