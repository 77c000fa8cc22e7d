/* kernel_cache.c — memory and disk caches of compiled kernels (see kernel_cache.h):
 * keys (and the NVRTC version they name, from the disk cache's stamp where NVRTC is not
 * loaded), the cache file format, atomic writes, validation, listing, clearing, and the
 * SPLAT_DUMP_DIR dumps. */
#include "cuda/kernel_cache.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"

/* ---------------------------------------------------------------- the file format
 * A cache file <32 hex key>.cubin is this header followed by the payload: program
 * name, arch, CUBIN, log (no NULs). All integers in host byte order (a file of another
 * byte order fails the magic/format check and is ignored). checksum = the 128-bit hash
 * (lo half) of the header with checksum = 0, then the payload. */
#define CACHE_MAGIC "SPLATKC\0"
#define CACHE_FORMAT 1u
#define CACHE_MAX_FILE (1u << 30) /* larger files are not ours */

typedef struct cache_header {
  char magic[8];
  uint32_t format;
  uint32_t header_bytes;
  uint64_t key_hi, key_lo;
  uint64_t cubin_bytes, log_bytes;
  uint32_t name_bytes, arch_bytes;
  uint64_t checksum;
  uint64_t created_unix;
} cache_header;

static uint64_t file_checksum(const cache_header *h, const unsigned char *payload, size_t n) {
  cache_header copy = *h;
  copy.checksum = 0;
  splat__hash s;
  splat__hash_init(&s);
  splat__hash_update(&s, &copy, sizeof copy);
  splat__hash_update(&s, payload, n);
  return splat__hash_final(&s).lo;
}

/* A cache file read into memory and checked. Pointers point into `data`. */
typedef struct cache_file {
  unsigned char *data;
  size_t size;
  cache_header header;
  const char *name, *arch, *log;
  const unsigned char *cubin;
} cache_file;

/* Reads and validates path. Returns 1 when the file is a complete, uncorrupted entry
 * (and, when key is not NULL, of that key); 0 otherwise (why says why; file->data is
 * freed). *missing is set when the file does not exist. Opens without blocking, so a FIFO
 * or device under an entry's name is refused, never waited on. */
static int cache_file_read(const char *path, const splat__hash128 *key, cache_file *file,
                           int *missing, const char **why) {
  memset(file, 0, sizeof *file);
  *missing = 0;
  *why = "";
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *missing = errno == ENOENT || errno == ENOTDIR;
    *why = "cannot be opened";
    return 0;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(cache_header) ||
      st.st_size > (off_t)CACHE_MAX_FILE) {
    close(fd);
    *why = "has an impossible size";
    return 0;
  }
  size_t size = (size_t)st.st_size;
  unsigned char *data = malloc(size);
  if (!data) {
    close(fd);
    *why = "does not fit in memory";
    return 0;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, data + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  cache_header h;
  memcpy(&h, data, sizeof h);
  const char *bad = NULL;
  if (got != size) {
    bad = "could not be read completely";
  } else if (memcmp(h.magic, CACHE_MAGIC, 8) != 0) {
    bad = "is not a splat cache file";
  } else if (h.format != CACHE_FORMAT || h.header_bytes != sizeof h) {
    bad = "is of another format version";
  } else if (key && (h.key_hi != key->hi || h.key_lo != key->lo)) {
    bad = "holds another key";
  } else if (h.cubin_bytes > size || h.log_bytes > size || h.name_bytes > 127 ||
             h.arch_bytes > 15 || h.cubin_bytes == 0 ||
             sizeof h + h.name_bytes + h.arch_bytes + h.cubin_bytes + h.log_bytes != size) {
    bad = "is truncated or has inconsistent sizes";
  } else if (file_checksum(&h, data + sizeof h, size - sizeof h) != h.checksum) {
    bad = "fails its checksum";
  }
  if (bad) {
    free(data);
    *why = bad;
    return 0;
  }
  file->data = data;
  file->size = size;
  file->header = h;
  /* The strings are not NUL-terminated in the file; copy them out where needed. */
  file->name = (const char *)data + sizeof h;
  file->arch = file->name + h.name_bytes;
  file->cubin = (const unsigned char *)file->arch + h.arch_bytes;
  file->log = (const char *)file->cubin + h.cubin_bytes;
  return 1;
}

/* Creates dir and its parents (mode 0755). Returns 0 on success, else -1 with errno
 * (ENOTDIR where dir exists but is no directory). */
static int mkdir_p(const char *dir) {
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path) return -1;
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] == '/' || path[i] == '\0') {
      char c = path[i];
      path[i] = '\0';
      if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
      path[i] = c;
    }
  }
  struct stat st;
  if (stat(dir, &st) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR; /* a file of that name */
    return -1;
  }
  return 0;
}

static int write_all(int fd, const void *data, size_t n) {
  const unsigned char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Writes the entry to dir/<hex>.cubin atomically: a unique temporary file in the same
 * directory, then rename(2), so readers see either no file or a complete one and two
 * writers of the same key simply replace each other's identical file. No fsync: after
 * a crash a file may be short or empty, and validation rejects it. Returns 0 on
 * success; failures are logged by the caller. */
static int cache_file_write(const char *dir, const char *hex, const splat__hash128 *key,
                            const char *program, const char *arch, const void *cubin,
                            size_t cubin_bytes, const char *log, const char **why) {
  if (mkdir_p(dir) != 0) {
    *why = "the directory cannot be created";
    return -1;
  }
  cache_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CACHE_MAGIC, 8);
  h.format = CACHE_FORMAT;
  h.header_bytes = sizeof h;
  h.key_hi = key->hi;
  h.key_lo = key->lo;
  size_t name_len = strlen(program), arch_len = strlen(arch), log_len = strlen(log);
  if (name_len > 127) name_len = 127;
  if (arch_len > 15) arch_len = 15;
  h.name_bytes = (uint32_t)name_len;
  h.arch_bytes = (uint32_t)arch_len;
  h.cubin_bytes = cubin_bytes;
  h.log_bytes = log_len;
  h.created_unix = (uint64_t)time(NULL);
  size_t payload = name_len + arch_len + cubin_bytes + log_len;
  unsigned char *buf = malloc(sizeof h + payload);
  if (!buf) {
    *why = "out of memory";
    return -1;
  }
  unsigned char *p = buf + sizeof h;
  memcpy(p, program, name_len);
  p += name_len;
  memcpy(p, arch, arch_len);
  p += arch_len;
  memcpy(p, cubin, cubin_bytes);
  p += cubin_bytes;
  memcpy(p, log, log_len);
  h.checksum = file_checksum(&h, buf + sizeof h, payload);
  memcpy(buf, &h, sizeof h);

  char tmp[4200], final_path[4200];
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s-XXXXXX", dir, hex);
  snprintf(final_path, sizeof final_path, "%s/%s.cubin", dir, hex);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    free(buf);
    *why = "a temporary file cannot be created";
    return -1;
  }
  int rc = write_all(fd, buf, sizeof h + payload);
  free(buf);
  if (rc == 0) rc = fchmod(fd, 0644);
  if (close(fd) != 0) rc = -1;
  if (rc == 0) rc = rename(tmp, final_path);
  if (rc != 0) {
    unlink(tmp);
    *why = "writing or renaming the temporary file failed";
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- directories */

/* splat__cache_dir without a message: 0, -1 (no variable names one), -2 (too long). */
static int cache_dir_quiet(char *buf, size_t cap) {
  buf[0] = '\0';
  const char *dir = getenv("SPLAT_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  int n;
  if (dir && *dir) {
    n = snprintf(buf, cap, "%s", dir);
  } else if (xdg && xdg[0] == '/') {
    n = snprintf(buf, cap, "%s/splat", xdg);
  } else if (home && *home) {
    n = snprintf(buf, cap, "%s/.cache/splat", home);
  } else {
    return -1;
  }
  if (n < 0 || (size_t)n >= cap) {
    buf[0] = '\0';
    return -2;
  }
  while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
  return 0;
}

splat_status splat__cache_dir(char *buf, size_t cap) {
  if (!buf || cap == 0) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__cache_dir: no buffer");
  }
  const int rc = cache_dir_quiet(buf, cap);
  if (rc == -1) {
    return splat__fail(SPLAT_ERR_IO,
                       "no kernel cache directory: none of SPLAT_CACHE_DIR, XDG_CACHE_HOME and "
                       "HOME is set");
  }
  if (rc == -2) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "the kernel cache directory path is longer than %zu characters", cap - 1);
  }
  return SPLAT_OK;
}

/* ---------------------------------------------------------------- the memory cache */

typedef struct mem_entry {
  splat__hash128 key;
  void *cubin;
  size_t cubin_size;
  char *log;
} mem_entry;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_entry *mem_entries;
static size_t mem_count, mem_cap;

/* Copies an entry into out (caller holds the lock). Returns 0 on success. */
static int copy_out(const void *cubin, size_t cubin_size, const char *log, splat__compiled *out) {
  memset(out, 0, sizeof *out);
  out->cubin = malloc(cubin_size ? cubin_size : 1);
  out->log = strdup(log ? log : "");
  if (!out->cubin || !out->log) {
    splat__compiled_free(out);
    return -1;
  }
  memcpy(out->cubin, cubin, cubin_size);
  out->cubin_size = cubin_size;
  return 0;
}

/* 1 and a copy in out when key is cached; 0 when not; -1 when out of memory. */
static int mem_lookup(const splat__hash128 *key, splat__compiled *out) {
  int found = 0;
  pthread_mutex_lock(&mem_lock);
  for (size_t i = 0; i < mem_count; i++) {
    if (mem_entries[i].key.hi == key->hi && mem_entries[i].key.lo == key->lo) {
      found = copy_out(mem_entries[i].cubin, mem_entries[i].cubin_size, mem_entries[i].log, out)
                  ? -1
                  : 1;
      break;
    }
  }
  pthread_mutex_unlock(&mem_lock);
  return found;
}

/* Adds a copy (no-op when the key is present or memory runs out: the cache is an
 * optimisation). */
static void mem_insert(const splat__hash128 *key, const void *cubin, size_t cubin_size,
                       const char *log) {
  pthread_mutex_lock(&mem_lock);
  for (size_t i = 0; i < mem_count; i++) {
    if (mem_entries[i].key.hi == key->hi && mem_entries[i].key.lo == key->lo) {
      pthread_mutex_unlock(&mem_lock);
      return;
    }
  }
  if (mem_count == mem_cap) {
    size_t cap = mem_cap ? 2 * mem_cap : 32;
    mem_entry *p = realloc(mem_entries, cap * sizeof *p);
    if (!p) {
      pthread_mutex_unlock(&mem_lock);
      return;
    }
    mem_entries = p;
    mem_cap = cap;
  }
  mem_entry e = {*key, malloc(cubin_size ? cubin_size : 1), cubin_size, strdup(log ? log : "")};
  if (!e.cubin || !e.log) {
    free(e.cubin);
    free(e.log);
  } else {
    memcpy(e.cubin, cubin, cubin_size);
    mem_entries[mem_count++] = e;
  }
  pthread_mutex_unlock(&mem_lock);
}

void splat__kernel_cache_drop_memory(void) {
  pthread_mutex_lock(&mem_lock);
  for (size_t i = 0; i < mem_count; i++) {
    free(mem_entries[i].cubin);
    free(mem_entries[i].log);
  }
  free(mem_entries);
  mem_entries = NULL;
  mem_count = mem_cap = 0;
  pthread_mutex_unlock(&mem_lock);
}

/* ---------------------------------------------------------------- keys and dumps */

const char *splat__cache_hit_name(splat__cache_hit hit) {
  switch (hit) {
    case SPLAT__CACHE_COMPILED:
      return "compiled";
    case SPLAT__CACHE_MEMORY:
      return "memory";
    case SPLAT__CACHE_DISK:
      return "disk";
  }
  return "unknown";
}

/* ---------------------------------------------------------------- the keys' NVRTC version
 * From the NVRTC this process has mapped, else from the disk cache's stamp:
 * nvrtc-<16 hex>.stamp, its name the hash of the variables NVRTC's search reads (nvrtc.c
 * open_nvrtc), its text
 *   splat nvrtc stamp 1 \n <file the loader mapped> \n <identity> \n <major> <minor> \n
 * with the file's identity as stat(2) gives it (device, inode, size, modification time).
 * A stamp whose file is gone, changed or not a regular file is not used (NVRTC is loaded and
 * the stamp rewritten). Known once per process: ver_state (atomic) then ver_major /
 * ver_minor, published under ver_lock; nothing slow (a load, a file) runs under the lock. */
#define STAMP_MAGIC "splat nvrtc stamp 1"
static pthread_mutex_t ver_lock = PTHREAD_MUTEX_INITIALIZER;
static int ver_state; /* 1: ver_major / ver_minor hold the keys' version */
static int ver_major, ver_minor;

/* A version the keys can name (the key hashes 1000 major + 10 minor). */
static int version_ok(long major, long minor) {
  return major >= 1 && major <= 999 && minor >= 0 && minor <= 99;
}

static void stamp_path(const char *dir, char *path, size_t cap) {
  static const char *const vars[] = {"SPLAT_NVRTC_LIBRARY", "LD_LIBRARY_PATH", "CUDA_HOME",
                                     "CUDA_PATH"};
  splat__hash h;
  splat__hash_init(&h);
  splat__hash_str(&h, STAMP_MAGIC);
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *v = getenv(vars[i]);
    splat__hash_str(&h, vars[i]);
    splat__hash_str(&h, v ? v : "");
  }
  char hex[33];
  splat__hash_hex(splat__hash_final(&h), hex);
  snprintf(path, cap, "%s/nvrtc-%.16s.stamp", dir, hex);
}

/* The identity of a regular file as text (0), or -1. */
static int file_identity(const char *file, char *buf, size_t cap) {
  struct stat s;
  if (!*file || stat(file, &s) != 0 || !S_ISREG(s.st_mode)) return -1;
  snprintf(buf, cap, "%llu %llu %lld %lld.%09ld", (unsigned long long)s.st_dev,
           (unsigned long long)s.st_ino, (long long)s.st_size, (long long)s.st_mtim.tv_sec,
           (long)s.st_mtim.tv_nsec);
  return 0;
}

/* 1 with the stamp's version where dir holds a stamp for this environment whose file is
 * still the one it names; else 0. Reads only a regular file (never blocks on a FIFO). */
static int stamp_read(const char *dir, int *major, int *minor) {
  char path[4200], text[1400], file[1100], identity[128], now[128];
  stamp_path(dir, path, sizeof path);
  const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat s;
  ssize_t n = fstat(fd, &s) == 0 && S_ISREG(s.st_mode) ? read(fd, text, sizeof text - 1) : -1;
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  /* four lines, the second and third whole */
  const char *l1 = strchr(text, '\n'), *l2 = l1 ? strchr(l1 + 1, '\n') : NULL;
  const char *l3 = l2 ? strchr(l2 + 1, '\n') : NULL;
  if (!l3 || (size_t)(l1 - text) != strlen(STAMP_MAGIC) || strncmp(text, STAMP_MAGIC, l1 - text) ||
      (size_t)(l2 - l1 - 1) >= sizeof file || (size_t)(l3 - l2 - 1) >= sizeof identity)
    return 0;
  memcpy(file, l1 + 1, (size_t)(l2 - l1 - 1));
  file[l2 - l1 - 1] = '\0';
  memcpy(identity, l2 + 1, (size_t)(l3 - l2 - 1));
  identity[l3 - l2 - 1] = '\0';
  char *end = NULL;
  errno = 0;
  const long ma = strtol(l3 + 1, &end, 10);
  if (errno || end == l3 + 1 || *end != ' ') return 0;
  const char *p = end + 1;
  const long mi = strtol(p, &end, 10);
  if (errno || end == p || *end != '\n' || !version_ok(ma, mi) ||
      file_identity(file, now, sizeof now) != 0 || strcmp(now, identity))
    return 0;
  *major = (int)ma;
  *minor = (int)mi;
  return 1;
}

/* Writes dir's stamp for the loaded NVRTC (atomically, as the cache files); failures only
 * mean the next process loads NVRTC again. */
static void stamp_write(const char *dir, int major, int minor) {
  const char *file = splat__nvrtc_file();
  char identity[128], text[1400], path[4200], tmp[4200];
  if (strchr(file, '\n') || file_identity(file, identity, sizeof identity) != 0 ||
      !version_ok(major, minor) || mkdir_p(dir) != 0)
    return;
  const int n =
      snprintf(text, sizeof text, "%s\n%s\n%s\n%d %d\n", STAMP_MAGIC, file, identity, major, minor);
  if (n < 0 || (size_t)n >= sizeof text) return;
  stamp_path(dir, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s/.tmp-nvrtc-XXXXXX", dir);
  const int fd = mkstemp(tmp);
  if (fd < 0) return;
  int rc = write_all(fd, text, (size_t)n);
  if (rc == 0) rc = fchmod(fd, 0644);
  if (close(fd) != 0) rc = -1;
  if (rc == 0) rc = rename(tmp, path);
  if (rc != 0) unlink(tmp);
}

/* Makes major.minor the keys' version (where force, over a known one). */
static void ver_publish(int major, int minor, int force) {
  pthread_mutex_lock(&ver_lock);
  if (force || !__atomic_load_n(&ver_state, __ATOMIC_ACQUIRE)) {
    ver_major = major, ver_minor = minor;
    __atomic_store_n(&ver_state, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&ver_lock);
}

static void ver_get(int *major, int *minor) {
  pthread_mutex_lock(&ver_lock);
  *major = ver_major, *minor = ver_minor;
  pthread_mutex_unlock(&ver_lock);
}

/* The version the keys name: known, else that of an NVRTC this process has mapped already
 * (by splat or by another library: the one NVRTC's search would return), else the stamp's,
 * else NVRTC loaded now; a version read from NVRTC is written to the stamp where the stamp
 * does not say it already. With `probe`, loads nothing and never waits for a load: *known = 1
 * only where no load is needed. */
static splat_status key_version(int probe, int *known, int *major, int *minor) {
  *known = 0;
  if (!__atomic_load_n(&ver_state, __ATOMIC_ACQUIRE)) {
    char dir[4096];
    const int have_dir = cache_dir_quiet(dir, sizeof dir) == 0;
    int sa = 0, sb = 0, ma = 0, mi = 0;
    const int stamped = have_dir && stamp_read(dir, &sa, &sb);
    if (splat__nvrtc_mapped(&ma, &mi)) {
      if (have_dir && splat__nvrtc_loaded() && (!stamped || sa != ma || sb != mi))
        stamp_write(dir, ma, mi);
      ver_publish(ma, mi, 0);
    } else if (stamped) {
      ver_publish(sa, sb, 0);
    } else if (!probe) {
      const splat_status st = splat__nvrtc_version(&ma, &mi); /* loads NVRTC */
      if (st != SPLAT_OK) return st;
      if (have_dir) stamp_write(dir, ma, mi);
      ver_publish(ma, mi, 0);
    } else {
      return SPLAT_OK;
    }
  }
  *known = 1;
  ver_get(major, minor);
  return SPLAT_OK;
}

int splat__kernel_cache_version_known(void) {
  int known = 0, major, minor;
  key_version(1, &known, &major, &minor);
  return known;
}

/* The key of (source, program_name, arch) for NVRTC major.minor. */
static splat__hash128 key_for(const char *source, const char *program_name, const char *arch,
                              int major, int minor) {
  char options[256];
  splat__nvrtc_options_text(arch, options, sizeof options);
  splat__hash h;
  splat__hash_init(&h);
  splat__hash_str(&h, "splat kernel cache");
  splat__hash_u64(&h, CACHE_FORMAT);
  splat__hash_str(&h, splat_version());
  splat__hash_u64(&h, (uint64_t)(major * 1000 + minor * 10));
  splat__hash_str(&h, options);
  splat__hash_str(&h, arch);
  splat__hash_str(&h, program_name);
  splat__hash_str(&h, source);
  return splat__hash_final(&h);
}

/* The key and the NVRTC version it names. */
static splat_status key_of(const char *source, const char *program_name, const char *arch,
                           splat__hash128 *key, int *major, int *minor) {
  if (!source || !program_name || !arch || !key) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "kernel cache key: source, program_name, arch and key must not be NULL");
  }
  int known = 0;
  const splat_status st = key_version(0, &known, major, minor);
  if (st != SPLAT_OK) return st;
  *key = key_for(source, program_name, arch, *major, *minor);
  return SPLAT_OK;
}

splat_status splat__kernel_cache_key(const char *source, const char *program_name, const char *arch,
                                     splat__hash128 *key) {
  int major = 0, minor = 0;
  return key_of(source, program_name, arch, key, &major, &minor);
}

static void dump_file(const char *dir, const char *base, const char *ext, const char *text) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s%s", dir, base, ext);
  FILE *f = fopen(path, "w");
  if (!f) {
    splat__log(SPLAT__LOG_WARN, "SPLAT_DUMP_DIR: cannot write %s (%s)", path, strerror(errno));
    return;
  }
  size_t n = strlen(text);
  if (fwrite(text, 1, n, f) != n) {
    splat__log(SPLAT__LOG_WARN, "SPLAT_DUMP_DIR: short write to %s", path);
  }
  fclose(f);
}

/* Writes <name>-<16 hex>.cu, .log and .ptx (a second, PTX-only compile) into
 * $SPLAT_DUMP_DIR when it is set. Never fails the caller. *ptx_out (may be NULL)
 * receives the PTX. */
static void dump(const char *source, const char *program_name, const char *arch, const char *hex,
                 const char *log, char **ptx_out) {
  const char *dir = getenv("SPLAT_DUMP_DIR");
  if (!dir || !*dir) return;
  if (mkdir_p(dir) != 0) {
    splat__log(SPLAT__LOG_WARN, "SPLAT_DUMP_DIR=%s cannot be created (%s); nothing dumped", dir,
               strerror(errno));
    return;
  }
  char base[200];
  size_t n = 0;
  for (const char *c = program_name; *c && n < 150; c++) {
    if (!strcmp(c, ".cu")) break;
    int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
             *c == '_' || *c == '-' || *c == '.';
    base[n++] = ok ? *c : '_';
  }
  snprintf(base + n, sizeof base - n, "-%.16s", hex);
  dump_file(dir, base, ".cu", source);
  dump_file(dir, base, ".log", log ? log : "");
  char *ptx = NULL;
  if (splat__nvrtc_ptx(source, program_name, arch, &ptx) == SPLAT_OK) {
    dump_file(dir, base, ".ptx", ptx);
  } else {
    splat__log(SPLAT__LOG_WARN, "SPLAT_DUMP_DIR: no PTX for %s: %s", program_name,
               splat__thread_error());
  }
  if (ptx_out) {
    *ptx_out = ptx;
  } else {
    free(ptx);
  }
  splat__log(SPLAT__LOG_INFO, "dumped %s/%s.{cu,log,ptx}", dir, base);
}

/* A kernel the disk cache could not take. Logged at warn level; where the user named the
 * directory (SPLAT_CACHE_DIR) and warnings are off, also said once on stderr: every
 * process would otherwise compile its kernels again (seconds a plan) without a word. */
static void store_failed(const char *program_name, const char *dir, const char *why, int err) {
  static int said = 0;
  splat__log(SPLAT__LOG_WARN,
             "kernel cache: cannot store %s in %s: %s (%s); continuing without the disk cache",
             program_name, dir, why, strerror(err));
  const char *named = getenv("SPLAT_CACHE_DIR");
  if (named && *named && !splat__log_enabled(SPLAT__LOG_WARN) &&
      !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
    fprintf(stderr,
            "splat: SPLAT_CACHE_DIR=%s cannot hold the kernel cache: %s (%s); kernels are "
            "compiled again in every process\n",
            named, why, strerror(err));
  }
}

/* ---------------------------------------------------------------- lookup */

splat_status splat__kernel_cache_get(const char *source, const char *program_name, const char *arch,
                                     splat__compiled *out, splat__cache_hit *hit) {
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__kernel_cache_get: out is NULL");
  memset(out, 0, sizeof *out);
  if (hit) *hit = SPLAT__CACHE_COMPILED;
  splat__hash128 key;
  int kmajor = 0, kminor = 0; /* the NVRTC version the key names */
  splat_status st = key_of(source, program_name, arch, &key, &kmajor, &kminor);
  if (st != SPLAT_OK) return st;
  char hex[33];
  splat__hash_hex(key, hex);

  int m = mem_lookup(&key, out);
  if (m < 0) return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "kernel cache: out of memory");
  if (m > 0) {
    if (hit) *hit = SPLAT__CACHE_MEMORY;
    splat__log(SPLAT__LOG_DEBUG, "kernel cache: %s (%s) from memory", program_name, hex);
    return SPLAT_OK;
  }

  char dir[4096], path[4200];
  int have_dir = splat__cache_dir(dir, sizeof dir) == SPLAT_OK;
  if (!have_dir) {
    splat__log(SPLAT__LOG_WARN, "kernel cache: %s; continuing without the disk cache",
               splat__thread_error());
  } else {
    double t0 = splat__now_ms();
    snprintf(path, sizeof path, "%s/%s.cubin", dir, hex);
    cache_file file;
    int missing = 0;
    const char *why = "";
    if (cache_file_read(path, &key, &file, &missing, &why)) {
      char *log = strndup(file.log, file.header.log_bytes);
      int failed = !log || copy_out(file.cubin, file.header.cubin_bytes, log, out) != 0;
      free(file.data);
      if (failed) {
        free(log);
        return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "kernel cache: out of memory");
      }
      mem_insert(&key, out->cubin, out->cubin_size, out->log);
      free(log);
      if (hit) *hit = SPLAT__CACHE_DISK;
      splat__log(SPLAT__LOG_DEBUG, "kernel cache: %s from %s in %.2f ms", program_name, path,
                 splat__now_ms() - t0);
      dump(source, program_name, arch, hex, out->log, NULL);
      return SPLAT_OK;
    }
    if (!missing) {
      splat__log(SPLAT__LOG_WARN, "kernel cache: ignoring %s: it %s; it will be replaced", path,
                 why);
    }
  }

  /* The compile loads NVRTC: where a stamp named another version than the loaded one, the
   * kernel is keyed by the loaded one (as are the keys from now on, and the stamp). */
  int major = 0, minor = 0;
  if (splat__nvrtc_version(&major, &minor) == SPLAT_OK && (major != kmajor || minor != kminor)) {
    splat__log(SPLAT__LOG_INFO,
               "kernel cache: NVRTC %d.%d is loaded where the cache's stamp named %d.%d; its "
               "kernels are keyed by %d.%d from now",
               major, minor, kmajor, kminor, major, minor);
    ver_publish(major, minor, 1);
    char sdir[4096];
    if (cache_dir_quiet(sdir, sizeof sdir) == 0) stamp_write(sdir, major, minor);
    key = key_for(source, program_name, arch, major, minor);
    splat__hash_hex(key, hex);
  }
  st = splat__nvrtc_compile(source, program_name, arch, out);
  if (st != SPLAT_OK) {
    /* Dump what failed too: the source and the full log are what one needs. */
    const char *dump_dir = getenv("SPLAT_DUMP_DIR");
    if (dump_dir && *dump_dir && st == SPLAT_ERR_COMPILE) {
      char message[SPLAT__ERROR_CAP];
      snprintf(message, sizeof message, "%s", splat__thread_error());
      if (mkdir_p(dump_dir) == 0) {
        char base[64];
        snprintf(base, sizeof base, "failed-%.16s", hex);
        dump_file(dump_dir, base, ".cu", source);
        dump_file(dump_dir, base, ".log", message);
      }
      splat__fail(st, "%s", message);
    }
    return st;
  }
  dump(source, program_name, arch, hex, out->log, &out->ptx);
  mem_insert(&key, out->cubin, out->cubin_size, out->log);
  if (have_dir) {
    const char *why = "";
    if (cache_file_write(dir, hex, &key, program_name, arch, out->cubin, out->cubin_size, out->log,
                         &why) != 0) {
      store_failed(program_name, dir, why, errno);
    }
  }
  return SPLAT_OK;
}

/* ---------------------------------------------------------------- list and clear */

static int is_cache_name(const char *name) {
  if (strlen(name) != 32 + 6 || strcmp(name + 32, ".cubin") != 0) return 0;
  splat__hash128 k;
  return splat__hash_parse_hex(name, &k);
}

/* 1 when the n bytes at s are lowercase hex digits (the form hash names are written in). */
static int is_lower_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* 1 for the names of splat's own temporary files: ".tmp-<32 hex>-XXXXXX" (an entry being
 * written) and ".tmp-nvrtc-XXXXXX" (a stamp being written), XXXXXX from mkstemp. */
static int is_temp_name(const char *name) {
  const size_t n = strlen(name);
  if (strncmp(name, ".tmp-", 5) != 0 || n < 12 || name[n - 7] != '-') return 0;
  for (size_t i = n - 6; i < n; i++)
    if (!isalnum((unsigned char)name[i])) return 0;
  const size_t middle = n - 12; /* between ".tmp-" and "-XXXXXX" */
  return (middle == 32 && is_lower_hex(name + 5, 32)) ||
         (middle == 5 && !strncmp(name + 5, "nvrtc", 5));
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir accepted by keep(), sorted. *names: malloc'd array of malloc'd
 * strings. Returns -1 when dir is missing (with *count 0), -2 on other errors. */
static int read_names(const char *dir, int (*keep)(const char *), char ***names, size_t *count) {
  *names = NULL;
  *count = 0;
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT ? -1 : -2;
  size_t cap = 0;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL) {
    if (!keep(e->d_name)) continue;
    if (*count == cap) {
      cap = cap ? 2 * cap : 64;
      char **p = realloc(*names, cap * sizeof *p);
      if (!p) {
        rc = -2;
        break;
      }
      *names = p;
    }
    char *copy = strdup(e->d_name);
    if (!copy) {
      rc = -2;
      break;
    }
    (*names)[(*count)++] = copy;
  }
  closedir(d);
  if (*count) qsort(*names, *count, sizeof **names, cmp_names);
  return rc;
}

static void free_names(char **names, size_t count) {
  for (size_t i = 0; i < count; i++) free(names[i]);
  free(names);
}

splat_status splat__cache_list(splat__cache_visit visit, void *user, int64_t *count) {
  if (count) *count = 0;
  char dir[4096];
  splat_status st = splat__cache_dir(dir, sizeof dir);
  if (st != SPLAT_OK) return st;
  char **names;
  size_t n;
  int rc = read_names(dir, is_cache_name, &names, &n);
  if (rc == -1) return SPLAT_OK;
  if (rc != 0) {
    free_names(names, n);
    return splat__fail(SPLAT_ERR_IO, "kernel cache: cannot list %s (%s)", dir, strerror(errno));
  }
  for (size_t i = 0; i < n; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    splat__cache_entry e;
    memset(&e, 0, sizeof e);
    e.path = path;
    memcpy(e.key, names[i], 32);
    e.key[32] = '\0';
    struct stat sb;
    if (stat(path, &sb) == 0) e.file_bytes = (int64_t)sb.st_size;
    splat__hash128 key;
    splat__hash_parse_hex(names[i], &key);
    cache_file file;
    int missing = 0;
    const char *why = "";
    if (cache_file_read(path, &key, &file, &missing, &why)) {
      e.valid = 1;
      snprintf(e.program, sizeof e.program, "%.*s", (int)file.header.name_bytes, file.name);
      snprintf(e.arch, sizeof e.arch, "%.*s", (int)file.header.arch_bytes, file.arch);
      e.cubin_bytes = (int64_t)file.header.cubin_bytes;
      e.log_bytes = (int64_t)file.header.log_bytes;
      e.created_unix = (int64_t)file.header.created_unix;
      free(file.data);
    } else if (missing) {
      continue; /* removed while listing */
    }
    if (count) (*count)++;
    if (visit && visit(&e, user)) break;
  }
  free_names(names, n);
  return SPLAT_OK;
}

/* 1 for "nvrtc-<16 hex>.stamp", the name stamp_path writes. */
static int is_stamp_name(const char *name) {
  return strlen(name) == 6 + 16 + 6 && !strncmp(name, "nvrtc-", 6) && is_lower_hex(name + 6, 16) &&
         !strcmp(name + 22, ".stamp");
}

static int is_cache_or_temp(const char *name) {
  return is_cache_name(name) || is_temp_name(name) || is_stamp_name(name);
}

splat_status splat__cache_clear(int64_t *removed) {
  if (removed) *removed = 0;
  char dir[4096];
  splat_status st = splat__cache_dir(dir, sizeof dir);
  if (st != SPLAT_OK) return st;
  char **names;
  size_t n;
  int rc = read_names(dir, is_cache_or_temp, &names, &n);
  if (rc == -1) return SPLAT_OK;
  if (rc != 0) {
    free_names(names, n);
    return splat__fail(SPLAT_ERR_IO, "kernel cache: cannot list %s (%s)", dir, strerror(errno));
  }
  st = SPLAT_OK;
  for (size_t i = 0; i < n; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (unlink(path) == 0) {
      if (removed && !is_temp_name(names[i])) (*removed)++;
    } else if (errno != ENOENT && st == SPLAT_OK) {
      st = splat__fail(SPLAT_ERR_IO, "kernel cache: cannot remove %s (%s)", path, strerror(errno));
    }
  }
  free_names(names, n);
  return st;
}
