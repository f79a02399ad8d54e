//! Table tests of the SSRF classification: every blocked range (its first, a middle and its
//! last address where it matters), public neighbours just outside, and every spelling of a host
//! that the URL parser accepts.

use std::net::{IpAddr, SocketAddr};

use toolgate_guard::net::{
    AllowPrivate, Blocked, Embedding, Target, UrlProblem, check_target, classify, domain_matches, parse_http_url,
};

#[test]
fn ranges() {
    use Blocked::*;
    let table: &[(&str, Option<Blocked>)] = &[
        ("0.0.0.0", Some(Unspecified)),
        ("0.255.255.255", Some(Unspecified)),
        ("1.0.0.0", None),
        ("9.255.255.255", None),
        ("10.0.0.0", Some(Private)),
        ("10.255.255.255", Some(Private)),
        ("11.0.0.0", None),
        ("100.63.255.255", None),
        ("100.64.0.0", Some(SharedCgnat)),
        ("100.127.255.255", Some(SharedCgnat)),
        ("100.128.0.0", None),
        ("127.0.0.1", Some(Loopback)),
        ("127.255.255.254", Some(Loopback)),
        ("169.254.169.254", Some(LinkLocal)),
        ("169.254.0.0", Some(LinkLocal)),
        ("169.255.0.0", None),
        ("172.15.255.255", None),
        ("172.16.0.0", Some(Private)),
        ("172.31.255.255", Some(Private)),
        ("172.32.0.0", None),
        ("192.0.0.0", Some(ProtocolAssignment)),
        ("192.0.0.255", Some(ProtocolAssignment)),
        ("192.0.1.0", None),
        ("192.0.2.1", Some(Documentation)),
        ("192.88.99.1", Some(ProtocolAssignment)),
        ("192.167.255.255", None),
        ("192.168.0.0", Some(Private)),
        ("192.168.255.255", Some(Private)),
        ("192.169.0.0", None),
        ("198.17.255.255", None),
        ("198.18.0.0", Some(Benchmarking)),
        ("198.19.255.255", Some(Benchmarking)),
        ("198.20.0.0", None),
        ("198.51.100.7", Some(Documentation)),
        ("203.0.113.9", Some(Documentation)),
        ("223.255.255.255", None),
        ("224.0.0.1", Some(Multicast)),
        ("239.255.255.255", Some(Multicast)),
        ("240.0.0.0", Some(Reserved)),
        ("254.255.255.255", Some(Reserved)),
        ("255.255.255.255", Some(Broadcast)),
        ("8.8.8.8", None),
        ("93.184.216.34", None),
        // IPv6
        ("::", Some(Unspecified)),
        ("::1", Some(Loopback)),
        ("::2", Some(Unspecified)), // IPv4-compatible 0.0.0.2, in 0.0.0.0/8
        ("fe80::1", Some(LinkLocal)),
        ("febf:ffff::1", Some(LinkLocal)),
        ("fec0::1", Some(UniqueLocal)),
        ("fc00::1", Some(UniqueLocal)),
        ("fdff:ffff::1", Some(UniqueLocal)),
        ("ff02::1", Some(Multicast)),
        ("ff0e::1", Some(Multicast)),
        ("2001:db8::1", Some(Documentation)),
        ("3fff::1", Some(Documentation)),
        ("2001:2::1", Some(Benchmarking)),
        ("2001:10::1", Some(ProtocolAssignment)),
        ("2001:1ff::1", Some(ProtocolAssignment)),
        ("2001:200::1", None),
        ("64:ff9b:1::1", Some(Nat64LocalUse)),
        ("100::1", Some(Discard)),
        ("1000::1", Some(Reserved)),
        ("4000::1", Some(Reserved)),
        ("2606:4700::1111", None),
        ("2a00:1450:4001:80b::200e", None),
    ];
    for (ip, want) in table {
        let addr: IpAddr = ip.parse().unwrap();
        assert_eq!(classify(addr).blocked, *want, "{ip}");
    }
}

#[test]
fn embedded_ipv4_is_what_counts() {
    let table: &[(&str, Embedding, &str, bool)] = &[
        ("::ffff:127.0.0.1", Embedding::Ipv4Mapped, "127.0.0.1", false),
        ("::ffff:7f00:1", Embedding::Ipv4Mapped, "127.0.0.1", false),
        ("::ffff:169.254.169.254", Embedding::Ipv4Mapped, "169.254.169.254", false),
        ("::ffff:8.8.8.8", Embedding::Ipv4Mapped, "8.8.8.8", true),
        ("::127.0.0.1", Embedding::Ipv4Compatible, "127.0.0.1", false),
        ("::10.0.0.1", Embedding::Ipv4Compatible, "10.0.0.1", false),
        ("64:ff9b::127.0.0.1", Embedding::Nat64, "127.0.0.1", false),
        ("64:ff9b::a9fe:a9fe", Embedding::Nat64, "169.254.169.254", false),
        ("64:ff9b::8.8.8.8", Embedding::Nat64, "8.8.8.8", true),
        ("2002:7f00:1::1", Embedding::SixToFour, "127.0.0.1", false),
        ("2002:c0a8:101::", Embedding::SixToFour, "192.168.1.1", false),
        ("2002:808:808::1", Embedding::SixToFour, "8.8.8.8", true),
        // Teredo: server 8.8.8.8 (public), client !0x80fffffe = 127.0.0.1.
        ("2001:0:808:808::80ff:fffe", Embedding::Teredo, "127.0.0.1", false),
        // Teredo: server 10.0.0.1.
        ("2001:0:a00:1::f7f7:f7f7", Embedding::Teredo, "10.0.0.1", false),
        // Teredo: both public (client !0xf7f7f7f7 = 8.8.8.8).
        ("2001:0:808:808::f7f7:f7f7", Embedding::Teredo, "8.8.8.8", true),
    ];
    for (ip, embedding, v4, public) in table {
        let verdict = classify(ip.parse().unwrap());
        assert_eq!(verdict.embedded, Some((*embedding, v4.parse().unwrap())), "{ip}");
        assert_eq!(verdict.is_public(), *public, "{ip}");
    }
}

fn target(url: &str) -> Result<Target, UrlProblem> {
    parse_http_url(url).map(|(_, t)| t)
}

/// Every spelling of a blocked address the WHATWG parser accepts comes out as the address, and
/// is blocked.
#[test]
fn spellings_of_blocked_hosts() {
    let table: &[(&str, &str)] = &[
        ("http://127.0.0.1/", "127.0.0.1"),
        ("http://0177.0.0.1/", "127.0.0.1"),      // octal
        ("http://0x7f.0.0.1/", "127.0.0.1"),      // hex
        ("http://0x7f000001/", "127.0.0.1"),      // hex integer
        ("http://2130706433/", "127.0.0.1"),      // decimal integer
        ("http://017700000001/", "127.0.0.1"),    // octal integer
        ("http://127.1/", "127.0.0.1"),           // short form
        ("http://127.0.1/", "127.0.0.1"),         // short form
        ("http://0/", "0.0.0.0"),                 // zero
        ("http://%31%32%37.0.0.1/", "127.0.0.1"), // percent-encoded digits
        ("http://\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}/", "127.0.0.1"), // full-width
        ("http://127\u{3002}0\u{3002}0\u{3002}1/", "127.0.0.1"), // ideographic full stops
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
        ("http://0xa9.0xfe.0xa9.0xfe/", "169.254.169.254"),
        ("http://2852039166/", "169.254.169.254"),
        ("http://0251.0376.0251.0376/", "169.254.169.254"),
        ("http://127.0.0.1./", "127.0.0.1"), // trailing dot
        ("http://[::1]/", "::1"),
        ("http://[0:0:0:0:0:0:0:1]/", "::1"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
        ("http://[::ffff:7f00:1]/", "::ffff:127.0.0.1"),
        ("http://[64:ff9b::7f00:1]/", "64:ff9b::7f00:1"),
        ("http://[2002:7f00:1::]/", "2002:7f00:1::"),
        ("http://[fe80::1]/", "fe80::1"),
        ("HTTP://[FC00::1]:8080/", "fc00::1"),
        ("https://198.18.0.1/", "198.18.0.1"),
        ("https://100.64.0.1:443/x", "100.64.0.1"),
    ];
    for (url, ip) in table {
        let t = target(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        let want: IpAddr = ip.parse().unwrap();
        assert_eq!(t, Target::Ip(want), "{url}");
        let err = check_target(&t).unwrap_err();
        assert!(matches!(err, UrlProblem::BlockedAddress { .. }), "{url}: {err}");
    }
}

#[test]
fn host_name_rules() {
    for url in [
        "http://localhost/",
        "http://LOCALHOST:8080/",
        "http://localhost./",
        "http://app.localhost/",
        "http://a.b.localhost./",
        "http://intranet/",
        "http://intranet./",
        "http://printer.local/",
        "http://db.internal/",
        "http://router.home.arpa/",
        "http://box.localdomain/",
        "http://\u{ff4c}\u{ff4f}\u{ff43}\u{ff41}\u{ff4c}\u{ff48}\u{ff4f}\u{ff53}\u{ff54}/", // full-width localhost
    ] {
        let t = target(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        let err = check_target(&t).unwrap_err();
        assert!(matches!(err, UrlProblem::LocalName { .. }), "{url}: {err}");
    }
    for (url, name) in [
        ("https://example.com/", "example.com"),
        ("https://Example.COM./a", "example.com"),
        ("https://docs.rs/tokio", "docs.rs"),
        ("https://xn--bcher-kva.example/", "xn--bcher-kva.example"),
        ("https://bücher.example/", "xn--bcher-kva.example"),
        ("https://localhost.example.com/", "localhost.example.com"),
    ] {
        let t = target(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(t, Target::Name(name.into()), "{url}");
        check_target(&t).unwrap_or_else(|e| panic!("{url}: {e}"));
    }
}

#[test]
fn refused_urls() {
    type Check = fn(&UrlProblem) -> bool;
    let cases: &[(&str, Check)] = &[
        ("file:///etc/passwd", |e| matches!(e, UrlProblem::Scheme { .. })),
        ("gopher://example.com/", |e| matches!(e, UrlProblem::Scheme { .. })),
        ("data:text/html,hi", |e| matches!(e, UrlProblem::Scheme { .. })),
        ("ftp://example.com/", |e| matches!(e, UrlProblem::Scheme { .. })),
        ("javascript:alert(1)", |e| matches!(e, UrlProblem::Scheme { .. })),
        ("http://user:pass@example.com/", |e| matches!(e, UrlProblem::Userinfo)),
        ("http://127.0.0.1:80@example.com/", |e| matches!(e, UrlProblem::Userinfo)),
        ("http://[fe80::1%25eth0]/", |e| matches!(e, UrlProblem::Malformed { .. })), // zone id
        ("http://[::1/", |e| matches!(e, UrlProblem::Malformed { .. })),
        ("not a url", |e| matches!(e, UrlProblem::Malformed { .. })),
        ("http://", |e| matches!(e, UrlProblem::Malformed { .. })),
        ("http://256.0.0.1/", |e| matches!(e, UrlProblem::Malformed { .. })),
        ("http://exa mple.com/", |e| matches!(e, UrlProblem::Malformed { .. })),
        ("", |e| matches!(e, UrlProblem::Malformed { .. })),
    ];
    for (url, ok) in cases {
        let err = target(url).unwrap_err();
        assert!(ok(&err), "{url}: {err:?}");
        assert!(!err.to_string().is_empty());
    }
    // An empty userinfo (`http://@example.com/`) is no credential: the host is example.com.
    assert_eq!(target("http://@example.com/").unwrap(), Target::Name("example.com".into()));
}

#[test]
fn allow_private_matches_address_and_port() {
    let allow =
        AllowPrivate::parse(&["127.0.0.1:8080", "10.0.0.0/8", "[::1]:9000", "198.18.0.0/15", "192.168.1.5"]).unwrap();
    let yes =
        ["127.0.0.1:8080", "10.1.2.3:443", "[::1]:9000", "198.19.3.4:80", "192.168.1.5:22", "[::ffff:127.0.0.1]:8080"];
    let no = ["127.0.0.1:8081", "127.0.0.2:8080", "11.0.0.1:80", "[::1]:9001", "192.168.1.6:22"];
    for a in yes {
        assert!(allow.allows(a.parse::<SocketAddr>().unwrap()), "{a}");
    }
    for a in no {
        assert!(!allow.allows(a.parse::<SocketAddr>().unwrap()), "{a}");
    }
    for bad in ["intranet:8080", "10.0.0.0/33", "127.0.0.1:99999", "[::1", "fe80::/129"] {
        let e = AllowPrivate::parse(&[bad]).unwrap_err();
        assert!(e.to_string().contains(bad), "{e}");
    }
}

#[test]
fn domains() {
    assert!(domain_matches("docs.rs", "docs.rs"));
    assert!(domain_matches("www.docs.rs", "docs.rs"));
    assert!(domain_matches("a.b.docs.rs", "*.docs.rs"));
    assert!(domain_matches("WWW.Docs.RS", ".docs.rs"));
    assert!(!domain_matches("evildocs.rs", "docs.rs"));
    assert!(!domain_matches("docs.rs.evil.com", "docs.rs"));
    assert!(!domain_matches("rs", "docs.rs"));
    assert!(!domain_matches("docs.rs", ""));
}
