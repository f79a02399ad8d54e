//! OAuth 2.1 with PKCE for bridged HTTP servers. Not written yet.
