//! `allow_private`: the private addresses (with a port, or a whole network) a user lets through.
//! Entries match the vetted address and port a connection goes to, never a name.

use std::net::{IpAddr, SocketAddr};

/// One `allow_private` entry: a network and, optionally, one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllowEntry {
    net: IpAddr,
    prefix: u8,
    port: Option<u16>,
}

/// A list of `allow_private` entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowPrivate {
    entries: Vec<AllowEntry>,
}

/// An entry that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "allow_private entry `{entry}`: {why}; write `IP:port`, `[IPv6]:port`, `IP` or a CIDR such as `10.0.0.0/8` or `198.18.0.0/15` (names are not accepted: entries match the address a connection goes to)"
)]
pub struct AllowEntryError {
    /// The entry.
    pub entry: String,
    /// What was wrong.
    pub why: String,
}

impl AllowEntry {
    /// Reads `IP`, `IP:port`, `[IPv6]:port`, `[IPv6]`, `CIDR`, `CIDR:port` (IPv4) or
    /// `[IPv6/len]:port`.
    pub fn parse(entry: &str) -> Result<AllowEntry, AllowEntryError> {
        let err = |why: &str| AllowEntryError { entry: entry.to_owned(), why: why.to_owned() };
        let s = entry.trim();
        let (addr, port) = if let Some(rest) = s.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or_else(|| err("unclosed `[`"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| err("expected `:port` after `]`"))?),
            };
            (inside, port)
        } else if s.matches(':').count() == 1 {
            let (a, p) = s.split_once(':').ok_or_else(|| err("bad port"))?;
            (a, Some(p))
        } else {
            (s, None)
        };
        let port =
            port.map(|p| p.parse::<u16>().map_err(|_| err("the port is not a number from 0 to 65535"))).transpose()?;
        let (ip, prefix) = match addr.split_once('/') {
            Some((ip, len)) => (ip, Some(len.parse::<u8>().map_err(|_| err("bad prefix length"))?)),
            None => (addr, None),
        };
        let ip: IpAddr = ip.parse().map_err(|_| err("not an IP address"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        if prefix > max {
            return Err(err("prefix length too long"));
        }
        Ok(AllowEntry { net: canonical(ip), prefix, port })
    }

    /// Whether `addr` is in this entry.
    pub fn matches(&self, addr: SocketAddr) -> bool {
        if self.port.is_some_and(|p| p != addr.port()) {
            return false;
        }
        match (self.net, canonical(addr.ip())) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = if self.prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(self.prefix)) };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = if self.prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(self.prefix)) };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// `::ffff:a.b.c.d` is `a.b.c.d` for matching.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

impl AllowPrivate {
    /// Reads every entry; the first bad one is the error.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<AllowPrivate, AllowEntryError> {
        let entries = entries.iter().map(|e| AllowEntry::parse(e.as_ref())).collect::<Result<_, _>>()?;
        Ok(AllowPrivate { entries })
    }

    /// Whether no private address is allowed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether a connection to `addr` is allowed although the address is not public.
    pub fn allows(&self, addr: SocketAddr) -> bool {
        self.entries.iter().any(|e| e.matches(addr))
    }
}
