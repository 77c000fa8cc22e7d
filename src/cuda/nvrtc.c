/* nvrtc.c — dlopen of NVRTC, compiling generated sources to CUBIN (and PTX on
 * request), and parsing the ptxas report out of the compile log. */
#include "cuda/nvrtc.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"

typedef struct _nvrtcProgram *nvrtc_program;
typedef int nvrtc_result;
enum { NVRTC_OK = 0, NVRTC_ERR_INVALID_OPTION = 5, NVRTC_ERR_COMPILATION = 6 };

static struct {
  nvrtc_result (*version)(int *major, int *minor);
  nvrtc_result (*create)(nvrtc_program *prog, const char *src, const char *name, int nheaders,
                         const char *const *headers, const char *const *include_names);
  nvrtc_result (*destroy)(nvrtc_program *prog);
  nvrtc_result (*compile)(nvrtc_program prog, int nopts, const char *const *opts);
  nvrtc_result (*log_size)(nvrtc_program prog, size_t *size);
  nvrtc_result (*log)(nvrtc_program prog, char *log);
  nvrtc_result (*cubin_size)(nvrtc_program prog, size_t *size);
  nvrtc_result (*cubin)(nvrtc_program prog, char *cubin);
  nvrtc_result (*ptx_size)(nvrtc_program prog, size_t *size);
  nvrtc_result (*ptx)(nvrtc_program prog, char *ptx);
  const char *(*error_string)(nvrtc_result rc);
  int major, minor;
  int ok;
  char path[512];
  char file[1024]; /* the file the loader mapped for it ("" when it cannot tell) */
  char why[768];
} nv;

static pthread_once_t nv_once = PTHREAD_ONCE_INIT;
static int nv_tried; /* load_nvrtc has run (atomic accesses) */

static void *try_open(const char *path, char *tried, size_t cap) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h) {
    snprintf(nv.path, sizeof nv.path, "%s", path);
  } else {
    /* Append ", path" whole, or nothing once the list is full. */
    size_t len = strlen(tried);
    const size_t n = strlen(path);
    if (len + 2 + n < cap) {
      if (len) {
        memcpy(tried + len, ", ", 2);
        len += 2;
      }
      memcpy(tried + len, path, n + 1);
    }
  }
  return h;
}

static const char *const sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

/* Search order: $SPLAT_NVRTC_LIBRARY, the sonames on the loader path, then the lib64 of
 * $CUDA_HOME, $CUDA_PATH and /usr/local/cuda (often not on the loader path). */
static void *open_nvrtc(char *tried, size_t cap) {
  const char *explicit_path = getenv("SPLAT_NVRTC_LIBRARY");
  void *h = NULL;
  if (explicit_path && *explicit_path && (h = try_open(explicit_path, tried, cap))) return h;
  for (int i = 0; i < 3; i++) {
    if ((h = try_open(sonames[i], tried, cap))) return h;
  }
  const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (int r = 0; r < 3; r++) {
    if (!roots[r] || !*roots[r]) continue;
    for (int i = 0; i < 3; i++) {
      char path[512];
      snprintf(path, sizeof path, "%s/lib64/%s", roots[r], sonames[i]);
      if ((h = try_open(path, tried, cap))) return h;
    }
  }
  return NULL;
}

static void load_nvrtc(void) {
  char tried[512] = "";
  void *h = open_nvrtc(tried, sizeof tried);
  if (!h) {
    snprintf(nv.why, sizeof nv.why,
             "NVRTC is not available: dlopen failed for %s; install the CUDA toolkit's NVRTC "
             "(libnvrtc.so.13 or .12) or set SPLAT_NVRTC_LIBRARY to its path",
             tried);
    return;
  }
#define SYM(field, name)                                                                     \
  do {                                                                                       \
    void *p = dlsym(h, name);                                                                \
    if (!p) {                                                                                \
      snprintf(nv.why, sizeof nv.why, "NVRTC at %s lacks %s; it is too old", nv.path, name); \
      return;                                                                                \
    }                                                                                        \
    memcpy(&nv.field, &p, sizeof p);                                                         \
  } while (0)
  SYM(version, "nvrtcVersion");
  SYM(create, "nvrtcCreateProgram");
  SYM(destroy, "nvrtcDestroyProgram");
  SYM(compile, "nvrtcCompileProgram");
  SYM(log_size, "nvrtcGetProgramLogSize");
  SYM(log, "nvrtcGetProgramLog");
  SYM(cubin_size, "nvrtcGetCUBINSize");
  SYM(cubin, "nvrtcGetCUBIN");
  SYM(ptx_size, "nvrtcGetPTXSize");
  SYM(ptx, "nvrtcGetPTX");
  SYM(error_string, "nvrtcGetErrorString");
#undef SYM
  if (nv.version(&nv.major, &nv.minor) != NVRTC_OK) {
    snprintf(nv.why, sizeof nv.why, "NVRTC at %s did not report its version", nv.path);
    return;
  }
  void *sym;
  memcpy(&sym, &nv.version, sizeof sym);
  Dl_info info;
  if (dladdr(sym, &info) && info.dli_fname &&
      snprintf(nv.file, sizeof nv.file, "%s", info.dli_fname) >= (int)sizeof nv.file)
    nv.file[0] = '\0'; /* cut short: no file rather than another one */
  nv.ok = 1;
  splat__log(SPLAT__LOG_INFO, "NVRTC %d.%d loaded from %s (%s)", nv.major, nv.minor, nv.path,
             nv.file);
  /* NVRTC stays loaded for the life of the process. */
}

/* load_nvrtc, then the mark that it ran. */
static void load_nvrtc_once(void) {
  load_nvrtc();
  __atomic_store_n(&nv_tried, 1, __ATOMIC_RELEASE);
}

static void *prefetch_main(void *arg) {
  (void)arg;
  pthread_once(&nv_once, load_nvrtc_once);
  return NULL;
}

void splat__nvrtc_prefetch_begin(splat__nvrtc_prefetch *p) {
  p->started = !__atomic_load_n(&nv_tried, __ATOMIC_ACQUIRE) &&
               pthread_create(&p->thread, NULL, prefetch_main, NULL) == 0;
}

void splat__nvrtc_prefetch_end(splat__nvrtc_prefetch *p) {
  if (p->started) pthread_join(p->thread, NULL);
  p->started = 0;
}

int splat__nvrtc_loaded(void) {
  return __atomic_load_n(&nv_tried, __ATOMIC_ACQUIRE) && nv.ok;
}

const char *splat__nvrtc_file(void) {
  return splat__nvrtc_loaded() ? nv.file : "";
}

int splat__nvrtc_mapped(int *major, int *minor) {
  if (splat__nvrtc_loaded()) {
    *major = nv.major, *minor = nv.minor;
    return 1;
  }
  /* The names the search tries first: the explicit one, else the sonames, which the loader
   * answers with a library of that soname where one is mapped. */
  const char *explicit_path = getenv("SPLAT_NVRTC_LIBRARY");
  const int one = explicit_path && *explicit_path;
  for (int i = 0; i < (one ? 1 : 3); i++) {
    void *h = dlopen(one ? explicit_path : sonames[i], RTLD_NOLOAD | RTLD_LAZY | RTLD_LOCAL);
    if (!h) continue;
    nvrtc_result (*version)(int *, int *) = NULL;
    void *sym = dlsym(h, "nvrtcVersion");
    memcpy(&version, &sym, sizeof sym);
    int a = 0, b = 0;
    const int ok = sym && version(&a, &b) == NVRTC_OK;
    dlclose(h); /* the reference RTLD_NOLOAD took */
    if (ok) *major = a, *minor = b;
    return ok;
  }
  return 0;
}

static splat_status nvrtc_load(void) {
  pthread_once(&nv_once, load_nvrtc_once);
  if (!nv.ok) return splat__fail(SPLAT_ERR_UNSUPPORTED, "%s", nv.why);
  return SPLAT_OK;
}

splat_status splat__nvrtc_version(int *major, int *minor) {
  splat_status st = nvrtc_load();
  if (major) *major = st == SPLAT_OK ? nv.major : 0;
  if (minor) *minor = st == SPLAT_OK ? nv.minor : 0;
  return st;
}

void splat__compiled_free(splat__compiled *c) {
  if (!c) return;
  free(c->cubin);
  free(c->ptx);
  free(c->log);
  memset(c, 0, sizeof *c);
}

/* "sm_<digits>" with an optional trailing letter (sm_90a, sm_100f): anything else is
 * refused before it reaches the option list. */
static int arch_valid(const char *arch) {
  if (!arch || strncmp(arch, "sm_", 3) != 0) return 0;
  const char *p = arch + 3;
  int digits = 0;
  while (isdigit((unsigned char)*p)) p++, digits++;
  if (digits < 2 || digits > 3) return 0;
  if (*p >= 'a' && *p <= 'z') p++;
  return *p == '\0';
}

enum { MAX_OPTS = 8 };

/* Fills opts with the compile options; storage holds the formatted ones. virt = 1
 * targets compute_<XY> (for PTX) instead of sm_<XY>. Returns the count. */
static int build_options(const char *arch, int virt, char storage[2][64], const char **opts) {
  int n = 0;
  snprintf(storage[0], 64, "--gpu-architecture=%s%s", virt ? "compute_" : "sm_", arch + 3);
  opts[n++] = storage[0];
  opts[n++] = "-default-device";
  opts[n++] = "-std=c++17";
  opts[n++] = "-lineinfo";
  if (!virt) opts[n++] = "--ptxas-options=-v";
  return n;
}

void splat__nvrtc_options_text(const char *arch, char *buf, size_t cap) {
  if (!buf || !cap) return;
  buf[0] = '\0';
  if (!arch_valid(arch)) return;
  char storage[2][64];
  const char *opts[MAX_OPTS];
  int n = build_options(arch, 0, storage, opts);
  size_t len = 0;
  for (int i = 0; i < n && len < cap; i++) {
    int w = snprintf(buf + len, cap - len, "%s%s", i ? " " : "", opts[i]);
    if (w < 0) break;
    len += (size_t)w;
  }
}

static char *program_log(nvrtc_program prog) {
  size_t size = 0;
  if (nv.log_size(prog, &size) != NVRTC_OK) size = 0;
  char *log = malloc(size + 1);
  if (!log) return NULL;
  log[0] = '\0';
  if (size && nv.log(prog, log) != NVRTC_OK) log[0] = '\0';
  log[size] = '\0';
  return log;
}

/* Copies the first `lines` lines of log into buf (cap chars). */
static void head_lines(const char *log, int lines, char *buf, size_t cap) {
  size_t n = 0;
  const char *p = log ? log : "";
  for (int l = 0; l < lines && *p; l++) {
    const char *nl = strchr(p, '\n');
    p = nl ? nl + 1 : p + strlen(p);
  }
  n = (size_t)(p - (log ? log : ""));
  while (n > 0 && (p[-1] == '\n' || p[-1] == '\r')) n--, p--;
  snprintf(buf, cap, "%.*s", (int)n, log ? log : "");
}

static splat_status compile_program(const char *source, const char *program_name, const char *arch,
                                    int virt, splat__compiled *out) {
  memset(out, 0, sizeof *out);
  if (!source || !program_name) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "NVRTC compile: source or program_name is NULL");
  }
  if (!arch_valid(arch)) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "NVRTC compile of %s: arch='%s' is not of the form sm_XY or sm_XYa",
                       program_name, arch ? arch : "(null)");
  }
  splat_status st = nvrtc_load();
  if (st != SPLAT_OK) return st;
  char storage[2][64];
  const char *opts[MAX_OPTS];
  int nopts = build_options(arch, virt, storage, opts);
  double t0 = splat__now_ms();
  nvrtc_program prog = NULL;
  nvrtc_result rc = nv.create(&prog, source, program_name, 0, NULL, NULL);
  if (rc != NVRTC_OK) {
    return splat__fail(SPLAT_ERR_COMPILE, "nvrtcCreateProgram(%s) failed: %s", program_name,
                       nv.error_string(rc));
  }
  rc = nv.compile(prog, nopts, opts);
  char *log = program_log(prog);
  if (!log) {
    nv.destroy(&prog);
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "NVRTC compile of %s: out of memory for the log",
                       program_name);
  }
  if (rc != NVRTC_OK) {
    char head[900];
    head_lines(log, 20, head, sizeof head);
    splat__log(SPLAT__LOG_ERROR, "NVRTC failed to compile %s for %s: %s\n%s", program_name, arch,
               nv.error_string(rc), log);
    st = splat__fail(rc == NVRTC_ERR_INVALID_OPTION ? SPLAT_ERR_UNSUPPORTED : SPLAT_ERR_COMPILE,
                     "NVRTC %d.%d failed to compile %s for %s: %s\n%s", nv.major, nv.minor,
                     program_name, arch, nv.error_string(rc), head);
    free(log);
    nv.destroy(&prog);
    return st;
  }
  size_t size = 0;
  char *image = NULL;
  if (virt) {
    rc = nv.ptx_size(prog, &size);
    if (rc == NVRTC_OK && (image = malloc(size + 1)) != NULL) {
      rc = nv.ptx(prog, image);
      image[size] = '\0';
    }
  } else {
    rc = nv.cubin_size(prog, &size);
    if (rc == NVRTC_OK && (image = malloc(size ? size : 1)) != NULL) rc = nv.cubin(prog, image);
  }
  nv.destroy(&prog);
  if (rc != NVRTC_OK || !image) {
    free(image);
    free(log);
    if (rc == NVRTC_OK) {
      return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "NVRTC compile of %s: out of memory",
                         program_name);
    }
    return splat__fail(SPLAT_ERR_COMPILE, "NVRTC compile of %s for %s: fetching the %s failed: %s",
                       program_name, arch, virt ? "PTX" : "CUBIN", nv.error_string(rc));
  }
  if (virt) {
    out->ptx = image;
  } else {
    out->cubin = image;
    out->cubin_size = size;
  }
  out->log = log;
  out->compile_ms = splat__now_ms() - t0;
  splat__log(SPLAT__LOG_INFO, "NVRTC compiled %s for %s%s in %.1f ms (%zu bytes)", program_name,
             virt ? "compute_" : "", virt ? arch + 3 : arch, out->compile_ms, size);
  return SPLAT_OK;
}

splat_status splat__nvrtc_compile(const char *source, const char *program_name, const char *arch,
                                  splat__compiled *out) {
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__nvrtc_compile: out is NULL");
  return compile_program(source, program_name, arch, 0, out);
}

splat_status splat__nvrtc_ptx(const char *source, const char *program_name, const char *arch,
                              char **ptx) {
  if (!ptx) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__nvrtc_ptx: ptx is NULL");
  *ptx = NULL;
  splat__compiled c;
  splat_status st = compile_program(source, program_name, arch, 1, &c);
  if (st != SPLAT_OK) return st;
  *ptx = c.ptx;
  c.ptx = NULL;
  splat__compiled_free(&c);
  return SPLAT_OK;
}

/* The number just before `suffix` at or after p and before end; -1 when absent. */
static long number_before(const char *p, const char *end, const char *suffix) {
  size_t slen = strlen(suffix);
  for (const char *s = p; s && s < end; s++) {
    s = strstr(s, suffix);
    if (!s || s >= end) break;
    const char *q = s;
    while (q > p && q[-1] == ' ') q--;
    const char *digits_end = q;
    while (q > p && isdigit((unsigned char)q[-1])) q--;
    if (q < digits_end) return strtol(q, NULL, 10);
    s += slen - 1;
  }
  return -1;
}

splat_status splat__ptxas_report(const char *log, const char *kernel, splat__ptxas_stats *out) {
  static const char marker[] = "Compiling entry function '";
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "ptxas report: out is NULL");
  memset(out, 0, sizeof *out);
  out->registers = -1;
  if (!log) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "ptxas report: the log is NULL");
  const char *section = NULL;
  size_t klen = kernel ? strlen(kernel) : 0;
  for (const char *p = strstr(log, marker); p; p = strstr(p + 1, marker)) {
    const char *name = p + sizeof marker - 1;
    const char *quote = strchr(name, '\'');
    if (!quote) break;
    if (!kernel || ((size_t)(quote - name) == klen && !strncmp(name, kernel, klen))) {
      section = quote;
      break;
    }
  }
  if (!section) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "ptxas report: no entry function '%s' in the compile log (was it compiled "
                       "with --ptxas-options=-v?)",
                       kernel ? kernel : "(any)");
  }
  const char *end = strstr(section, marker);
  if (!end) end = section + strlen(section);
  for (const char *used = section; (used = strstr(used, "Used ")) && used < end; used += 5) {
    char *after = NULL;
    long n = strtol(used + 5, &after, 10);
    if (after != used + 5 && !strncmp(after, " registers", 10)) {
      out->registers = (int)n;
      break;
    }
  }
  if (out->registers < 0) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "ptxas report: no \"Used N registers\" line for entry function '%s'",
                       kernel ? kernel : "(first)");
  }
  long v;
  if ((v = number_before(section, end, " bytes spill stores")) > 0) out->spill_stores = (int)v;
  if ((v = number_before(section, end, " bytes spill loads")) > 0) out->spill_loads = (int)v;
  if ((v = number_before(section, end, " bytes stack frame")) > 0) out->stack = (int)v;
  if ((v = number_before(section, end, " bytes smem")) > 0) out->smem = (int)v;
  return SPLAT_OK;
}
