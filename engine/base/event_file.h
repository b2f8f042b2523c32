/* TensorBoard event files: TFRecord records (uint64 length, masked CRC-32C of the length, the
 * data, masked CRC-32C of the data; little-endian) each holding one Event protocol buffer,
 * encoded by hand (tensorboard's event.proto and summary.proto):
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; }
 * The first record names the format ("brain.Event:2"); each later one carries scalars. */
#ifndef CT_EVENT_FILE_H
#define CT_EVENT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define CT_EVENT_FILE_VERSION "brain.Event:2"

typedef struct ct_scalar {
    const char *tag;
    float value;
} ct_scalar;

/* Frames n bytes of record data: header (the length, then its masked CRC) and footer (the data's
 * masked CRC); the record on disk is header, data, footer. */
enum { CT_TFRECORD_HEADER = 12, CT_TFRECORD_FOOTER = 4 };
void ct_tfrecord_frame(const void *data, size_t n, unsigned char header[CT_TFRECORD_HEADER],
                       unsigned char footer[CT_TFRECORD_FOOTER]);

/* One Event into buf (cap bytes): with file_version, the file's first event, else a summary of
 * the n scalars. Returns the encoded size; when it exceeds cap, nothing past cap is written (call
 * with cap 0 to size the buffer). */
size_t ct_event_encode(unsigned char *buf, size_t cap, double wall_time, int64_t step, const char *file_version,
                       const ct_scalar *scalars, int n);

typedef struct ct_event_file ct_event_file;

/* Creates dir (with its parents) when missing and a new event file in it,
 * events.out.tfevents.<unix time>.<host name> (".2", ".3", ... added should that name be taken),
 * holding the version event. CT_ERR_IO, naming the folder, when it cannot be created or written. */
ct_status ct_event_file_open(const char *dir, ct_event_file **out, ct_err *err);
/* One event at `step` holding the scalars, flushed to the file, so that TensorBoard sees it now. */
ct_status ct_event_file_write(ct_event_file *f, int64_t step, const ct_scalar *scalars, int n, ct_err *err);
const char *ct_event_file_path(const ct_event_file *f);
void ct_event_file_close(ct_event_file *f);

#endif
