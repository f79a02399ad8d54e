//! DNS pinning: reqwest asks this resolver for a name's addresses, and it answers only with the
//! addresses the fetcher vetted for the request in flight. It never resolves anything itself
//! (except the configured proxy's own name), so a second DNS answer can never be used.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

#[derive(Debug, Default)]
struct Pins {
    /// name -> (vetted addresses, requests using them).
    map: HashMap<String, (Vec<SocketAddr>, usize)>,
}

/// The resolver plugged into the fetcher's client.
#[derive(Debug, Clone, Default)]
pub(crate) struct PinnedResolver {
    pins: Arc<Mutex<Pins>>,
    /// The proxy's host name: the one name resolved by the system (the user configured it).
    proxy_host: Option<String>,
}

/// Keeps a name pinned while its request runs.
#[derive(Debug)]
pub(crate) struct PinGuard {
    pins: Arc<Mutex<Pins>>,
    name: String,
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, users)) = pins.map.get_mut(&self.name) {
            *users -= 1;
            if *users == 0 {
                pins.map.remove(&self.name);
            }
        }
    }
}

impl PinnedResolver {
    pub(crate) fn new(proxy_host: Option<String>) -> Self {
        PinnedResolver { pins: Arc::default(), proxy_host }
    }

    /// Pins `name` to `addrs` until the guard is dropped.
    pub(crate) fn pin(&self, name: &str, addrs: Vec<SocketAddr>) -> PinGuard {
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = pins.map.entry(name.to_owned()).or_insert_with(|| (Vec::new(), 0));
        // A concurrent request may have vetted another answer; either set was vetted.
        entry.0 = addrs;
        entry.1 += 1;
        PinGuard { pins: self.pins.clone(), name: name.to_owned() }
    }
}

impl Resolve for PinnedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        if self.proxy_host.as_deref() == Some(host.as_str()) {
            return Box::pin(async move {
                let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
                Ok(Box::new(addrs.into_iter()) as Addrs)
            });
        }
        let pinned = {
            let pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
            pins.map.get(&host).map(|(addrs, _)| addrs.clone())
        };
        Box::pin(async move {
            match pinned {
                Some(addrs) => Ok(Box::new(addrs.into_iter()) as Addrs),
                None => Err(format!("`{host}` was not vetted for this request (refusing to resolve it again)").into()),
            }
        })
    }
}
