// SPDX-License-Identifier: Apache-2.0
// A stand-in for OpenBLAS's introspection functions, built as a loadable module so the
// fingerprint test can load it into the test process and see host collection find it with dlsym
// (this machine has no OpenBLAS). Its configuration string is hostile on purpose: a library's
// own text is input like any other and must not forge a report line.
extern "C" {

char* openblas_get_config() {
  static char text[] = "OpenBLAS 0.3.99 (fake) DYNAMIC_ARCH\n::error::forged by the BLAS";
  return text;
}

char* openblas_get_corename() {
  static char text[] = "Haswell";
  return text;
}

int openblas_get_num_threads() { return 3; }

}  // extern "C"
