//! Generates `include/redlock.h` from the `extern "C"` items under `src/ffi/` with cbindgen,
//! and writes it only when its content changes, so that a clean checkout is never modified.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");

    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets this"));
    let mut config =
        cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml is valid");
    let v = |k: &str| std::env::var(k).expect("cargo sets the package version");
    config.after_includes = Some(format!(
        "\n#define REDLOCK_VERSION_MAJOR {}\n#define REDLOCK_VERSION_MINOR {}\n\
         #define REDLOCK_VERSION_PATCH {}\n#define REDLOCK_VERSION \"{}\"",
        v("CARGO_PKG_VERSION_MAJOR"),
        v("CARGO_PKG_VERSION_MINOR"),
        v("CARGO_PKG_VERSION_PATCH"),
        v("CARGO_PKG_VERSION"),
    ));
    let bindings = cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate include/redlock.h");
    let mut out = Vec::new();
    bindings.write(&mut out);
    let path = dir.join("include").join("redlock.h");
    if std::fs::read(&path).ok().as_deref() != Some(&out[..]) {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("create include/");
        std::fs::write(&path, &out).expect("write include/redlock.h");
    }
}
