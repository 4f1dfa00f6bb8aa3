/* fileio.h — the file side of the ckpz command line: what cli.c decided, applied to
 * files. cli.c parses arguments into a fio_prefs and calls one fio_*_files function per
 * operation; everything that touches the file system (naming outputs, temporary files,
 * refusing terminals, signals, progress, the summaries) lives behind these calls so that
 * the argument parser stays a table of flags. All functions print their own messages
 * ("ckpz: FILE: reason") and return 0 on success, 1 if any file failed.
 */
#ifndef CKPZ_FILEIO_H
#define CKPZ_FILEIO_H

#include <stddef.h>
#include "ckpz.h"

#define FIO_SUFFIX ".ckpz"

typedef struct fio_prefs {
    int level;                 /* 1..9 */
    int threads;               /* 0 = all cores */
    int threads_set;           /* -T given (bench defaults to one thread otherwise) */
    size_t chunk_size;         /* 0 = library default */
    ckpz_input_format format;
    ckpz_dtype raw_dtype;
    size_t mem_limit;          /* --memory: 0 = library default */
    int force;                 /* -f */
    int remove_src;            /* --rm */
    int to_stdout;             /* -c */
    const char *out_name;      /* -o, or NULL */
    int verbosity;             /* 0 silent, 1 errors, 2 default, 3+ -v */
    int progress;              /* -1 auto (stderr is a terminal), 0 off, 1 on */
    double bench_seconds;      /* -i#: time per benchmark measurement */
    const char *base_path;     /* --base, or NULL */
    unsigned keyframe_every;   /* --keyframe-every: 0 = no limit on chains */
    const char *policy;        /* lossy rules (ckpz_params.policy), or NULL */
    const char *levels;        /* --target-bw's per-tensor levels (a lossless policy) when policy is NULL */
    int stats;                 /* --stats: 0 off, 1 text, 2 JSON (one object per file, stderr) */
    double target_bw;          /* --target-bw: MB/s of the output's link; 0 = not tuning */
    int cpu_budget;            /* --cpu-budget: most threads --target-bw may choose; 0 = all */
    double max_mae;            /* --max-mae: 0 = none */
    ckpz_codec codec;          /* --codec: CKPZ_CODEC_AUTO by default (0) */
} fio_prefs;

void fio_prefs_init(fio_prefs *p);
/* ckpz_params from the preferences (threads as given). */
void fio_params(const fio_prefs *p, ckpz_params *params);

/* Removes the current temporary output on SIGINT/SIGTERM/SIGHUP, then dies of the
 * signal as usual. Call once, early. */
void fio_install_signal_handlers(void);

/* "-" is standard input. */
int fio_compress_files(const fio_prefs *p, const char *const *files, int n);
int fio_decompress_files(const fio_prefs *p, const char *const *files, int n);
int fio_test_files(const fio_prefs *p, const char *const *files, int n);
int fio_list_files(const fio_prefs *p, const char *const *files, int n);
int fio_extract(const fio_prefs *p, const char *tensor, const char *file);
/* --rebase: each delta FILE.ckpz becomes a stand-alone one (to -o, or in its place). */
int fio_rebase_files(const fio_prefs *p, const char *const *files, int n);


/* ---- -r (filelist.c) ---- */
/* The names in in[0..n), each directory among them replaced by the regular files under
 * it, in name order, without following symbolic links: for compression (want_ckpz 0)
 * the files without the .ckpz suffix, else only those with it. *out is malloc'd (free
 * it with fio_list_free); *failed is set when a directory could not be read (reported).
 * 0, or -1 when out of memory. */
int fio_expand_dirs(const fio_prefs *p, int want_ckpz, const char *const *in, int n, char ***out, int *nout,
                    int *failed);
void fio_list_free(char **v, int n);

/* ---- bases of delta files (basefile.c) ---- */
typedef struct fio_base {
    char *path;       /* as named */
    void *data;       /* the base's original bytes */
    size_t size;
    int mapped;
    uint32_t depth;   /* delta files behind these bytes: 0 for a stand-alone file */
} fio_base;
/* Loads the base named path: an original file, or a .ckpz restored (through its own
 * chain, found beside it). Prints its errors; 0 or -1. */
int fio_base_load(const fio_prefs *p, const char *path, fio_base *b);
void fio_base_free(fio_base *b); /* accepts a zeroed base */
/* The name recorded in files coded against b: its file name without directories. */
const char *fio_base_record_name(const fio_base *b);
/* The file a delta file's recorded base name refers to: the name, or the name plus
 * .ckpz, beside `referrer`; malloc'd, or NULL when there is none. */
char *fio_base_locate(const char *referrer, const char *recorded);
/* Reads up to cap bytes from the start of path; 0, or -1 with errno. */
int fio_read_head(const char *path, unsigned char *head, size_t cap, size_t *len);

/* Reads a whole regular file (or "-") into malloc'd memory; prints the error itself. */
int fio_load_file(const char *path, void **data, size_t *size);

/* "ckpz: " + message + newline on stderr, when verbosity allows (errors: level >= 1). */
void fio_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Human-readable size: "512 B", "7.84 MiB", "12.0 GiB". */
const char *fio_human(char *buf, size_t len, unsigned long long bytes);

#endif /* CKPZ_FILEIO_H */
