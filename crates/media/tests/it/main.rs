//! The media tools on real files, real programs (espeak-ng, sox, ffmpeg) and provider doubles
//! on loopback that follow each provider's documented format.

mod images;
mod providers;
mod speech;
mod support;
mod video;
