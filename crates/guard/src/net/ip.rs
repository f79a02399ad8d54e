//! Is an IP address public? Every special-purpose range from the IANA registries, with the
//! IPv4 address embedded in an IPv6 one classified as the IPv4 address it reaches.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not public: the range it falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Blocked {
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918: `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// RFC 6598 carrier-grade NAT, `100.64.0.0/10`.
    SharedCgnat,
    /// `169.254.0.0/16` (cloud metadata at 169.254.169.254), `fe80::/10`.
    LinkLocal,
    /// IPv6 unique local addresses, `fc00::/7`, and the deprecated site-local `fec0::/10`.
    UniqueLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `240.0.0.0/4` and IPv6 outside global unicast `2000::/3`.
    Reserved,
    /// Benchmarking, `198.18.0.0/15` (also what fake-IP DNS such as Clash answers), `2001:2::/48`.
    Benchmarking,
    /// Documentation: `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// IETF protocol assignments, `192.0.0.0/24`, `192.88.99.0/24` (6to4 relays), `2001::/23`.
    ProtocolAssignment,
    /// NAT64 local-use prefix `64:ff9b:1::/48` (its embedding is site-specific).
    Nat64LocalUse,
    /// IPv6 discard prefix `100::/64`.
    Discard,
}

impl Blocked {
    /// The range in words, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Blocked::Unspecified => "an unspecified address (0.0.0.0/8, ::)",
            Blocked::Loopback => "a loopback address (127.0.0.0/8, ::1)",
            Blocked::Private => "a private network address (10/8, 172.16/12, 192.168/16)",
            Blocked::SharedCgnat => "a carrier-grade NAT address (100.64.0.0/10)",
            Blocked::LinkLocal => "a link-local address (169.254/16 incl. cloud metadata, fe80::/10)",
            Blocked::UniqueLocal => "an IPv6 unique/site-local address (fc00::/7, fec0::/10)",
            Blocked::Multicast => "a multicast address",
            Blocked::Broadcast => "the broadcast address",
            Blocked::Reserved => "a reserved address (240.0.0.0/4, IPv6 outside 2000::/3)",
            Blocked::Benchmarking => "a benchmarking address (198.18.0.0/15, 2001:2::/48)",
            Blocked::Documentation => "a documentation address",
            Blocked::ProtocolAssignment => "an IETF protocol-assignment address (192.0.0/24, 192.88.99/24, 2001::/23)",
            Blocked::Nat64LocalUse => "a local-use NAT64 address (64:ff9b:1::/48)",
            Blocked::Discard => "an IPv6 discard address (100::/64)",
        }
    }
}

/// How an address is reached, once the IPv4 address inside an IPv6 one is taken out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embedding {
    /// A plain address.
    None,
    /// `::ffff:a.b.c.d`.
    Ipv4Mapped,
    /// `::a.b.c.d` (deprecated IPv4-compatible).
    Ipv4Compatible,
    /// `64:ff9b::a.b.c.d`.
    Nat64,
    /// `2002:AABB:CCDD::/48`.
    SixToFour,
    /// Teredo `2001:0::/32`, server or (obfuscated) client address.
    Teredo,
}

/// The verdict on one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Why it is blocked, `None` when public.
    pub blocked: Option<Blocked>,
    /// The IPv4 address the verdict was decided on, when it was embedded in an IPv6 one.
    pub embedded: Option<(Embedding, Ipv4Addr)>,
}

impl Verdict {
    /// Whether the address is public.
    pub fn is_public(&self) -> bool {
        self.blocked.is_none()
    }
}

/// Classifies `ip`: public, or blocked with the range it falls in.
pub fn classify(ip: IpAddr) -> Verdict {
    match ip {
        IpAddr::V4(v4) => Verdict { blocked: classify_v4(v4), embedded: None },
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Whether `ip` is public (shorthand for [`classify`]).
pub fn is_public(ip: IpAddr) -> bool {
    classify(ip).is_public()
}

fn in_v4(ip: u32, net: [u8; 4], prefix: u32) -> bool {
    let net = u32::from_be_bytes(net);
    let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
    ip & mask == net & mask
}

fn classify_v4(ip: Ipv4Addr) -> Option<Blocked> {
    let n = u32::from(ip);
    let table: &[([u8; 4], u32, Blocked)] = &[
        ([0, 0, 0, 0], 8, Blocked::Unspecified),
        ([10, 0, 0, 0], 8, Blocked::Private),
        ([100, 64, 0, 0], 10, Blocked::SharedCgnat),
        ([127, 0, 0, 0], 8, Blocked::Loopback),
        ([169, 254, 0, 0], 16, Blocked::LinkLocal),
        ([172, 16, 0, 0], 12, Blocked::Private),
        ([192, 0, 0, 0], 24, Blocked::ProtocolAssignment),
        ([192, 0, 2, 0], 24, Blocked::Documentation),
        ([192, 88, 99, 0], 24, Blocked::ProtocolAssignment),
        ([192, 168, 0, 0], 16, Blocked::Private),
        ([198, 18, 0, 0], 15, Blocked::Benchmarking),
        ([198, 51, 100, 0], 24, Blocked::Documentation),
        ([203, 0, 113, 0], 24, Blocked::Documentation),
        ([224, 0, 0, 0], 4, Blocked::Multicast),
        ([255, 255, 255, 255], 32, Blocked::Broadcast),
        ([240, 0, 0, 0], 4, Blocked::Reserved),
    ];
    table.iter().find(|(net, prefix, _)| in_v4(n, *net, *prefix)).map(|(_, _, why)| *why)
}

fn in_v6(ip: u128, net: u128, prefix: u32) -> bool {
    let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
    ip & mask == net & mask
}

fn v6(s: [u16; 8]) -> u128 {
    u128::from(Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]))
}

fn embedded(embedding: Embedding, v4: Ipv4Addr) -> Verdict {
    Verdict { blocked: classify_v4(v4), embedded: Some((embedding, v4)) }
}

fn classify_v6(ip: Ipv6Addr) -> Verdict {
    let n = u128::from(ip);
    let low32 = Ipv4Addr::from((n & 0xffff_ffff) as u32);
    let plain = |blocked| Verdict { blocked: Some(blocked), embedded: None };
    if n == 0 {
        return plain(Blocked::Unspecified);
    }
    if n == 1 {
        return plain(Blocked::Loopback);
    }
    if in_v6(n, v6([0, 0, 0, 0, 0, 0xffff, 0, 0]), 96) {
        return embedded(Embedding::Ipv4Mapped, low32);
    }
    if in_v6(n, 0, 96) {
        return embedded(Embedding::Ipv4Compatible, low32);
    }
    if in_v6(n, v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0]), 96) {
        return embedded(Embedding::Nat64, low32);
    }
    if in_v6(n, v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0]), 48) {
        return plain(Blocked::Nat64LocalUse);
    }
    if in_v6(n, v6([0x100, 0, 0, 0, 0, 0, 0, 0]), 64) {
        return plain(Blocked::Discard);
    }
    if in_v6(n, v6([0x2002, 0, 0, 0, 0, 0, 0, 0]), 16) {
        return embedded(Embedding::SixToFour, Ipv4Addr::from(((n >> 80) & 0xffff_ffff) as u32));
    }
    if in_v6(n, v6([0x2001, 0, 0, 0, 0, 0, 0, 0]), 32) {
        // Teredo: the server's IPv4 in bits 32..64, the client's (inverted) in the last 32.
        let server = Ipv4Addr::from(((n >> 64) & 0xffff_ffff) as u32);
        let client = Ipv4Addr::from(!((n & 0xffff_ffff) as u32));
        let server_verdict = embedded(Embedding::Teredo, server);
        return if server_verdict.is_public() { embedded(Embedding::Teredo, client) } else { server_verdict };
    }
    let table: &[(u128, u32, Blocked)] = &[
        (v6([0xfc00, 0, 0, 0, 0, 0, 0, 0]), 7, Blocked::UniqueLocal),
        (v6([0xfec0, 0, 0, 0, 0, 0, 0, 0]), 10, Blocked::UniqueLocal),
        (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0]), 10, Blocked::LinkLocal),
        (v6([0xff00, 0, 0, 0, 0, 0, 0, 0]), 8, Blocked::Multicast),
        (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]), 32, Blocked::Documentation),
        (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0]), 20, Blocked::Documentation),
        (v6([0x2001, 0x2, 0, 0, 0, 0, 0, 0]), 48, Blocked::Benchmarking),
        (v6([0x2001, 0, 0, 0, 0, 0, 0, 0]), 23, Blocked::ProtocolAssignment),
    ];
    if let Some((_, _, why)) = table.iter().find(|(net, prefix, _)| in_v6(n, *net, *prefix)) {
        return plain(*why);
    }
    if !in_v6(n, v6([0x2000, 0, 0, 0, 0, 0, 0, 0]), 3) {
        return plain(Blocked::Reserved);
    }
    Verdict { blocked: None, embedded: None }
}
