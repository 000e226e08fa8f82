'use strict';
// The prebuilt addon package for this machine (README "Prebuilt binaries"):
// @redlock-quorum/<platform>-<arch>, with -musl on a Linux whose C library is musl.

/** '-musl' on a Linux without glibc, else ''. */
function libc() {
  if (process.platform !== 'linux') return '';
  const report = process.report && process.report.getReport ? process.report.getReport() : null;
  const glibc = report && report.header && report.header.glibcVersionRuntime;
  return glibc ? '' : '-musl';
}

/** The directory name of this machine's package: linux-x64, linux-x64-musl, darwin-arm64, … */
function triple() {
  return `${process.platform}-${process.arch}${libc()}`;
}

/** The npm name of this machine's prebuilt addon package. */
function packageName() {
  return `@redlock-quorum/${triple()}`;
}

module.exports = { libc, triple, packageName };
