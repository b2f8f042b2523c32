/* cutrain predict on image files, and the training folder's record in checkpoints, end to end: a
 * network trained on a folder of class folders of PNG files (made here: dark and bright squares)
 * saves version 3 checkpoints with the class names; predict names the class of each PNG file of a
 * folder, of files given as bare paths, and of an IDX file; --resume refuses the checkpoint once a
 * file is added to the training folder, writing nothing. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <zlib.h>

#include "tests/cli_util.h"

enum { SIDE = 8, PER_CLASS = 16 };

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* One PNG chunk: length, type, data, CRC of type and data. */
static void chunk(FILE *f, const char *type, const unsigned char *data, uint32_t n)
{
    unsigned char head[8];
    put_be32(head, n);
    memcpy(head + 4, type, 4);
    fwrite(head, 1, 8, f);
    if (n)
        fwrite(data, 1, n, f);
    uLong crc = crc32(0L, (const Bytef *)type, 4);
    if (n)
        crc = crc32(crc, data, (uInt)n);
    unsigned char tail[4];
    put_be32(tail, (uint32_t)crc);
    fwrite(tail, 1, 4, f);
}

/* A SIDE x SIDE 8-bit grey PNG of pixels near `level` (a small pattern so files differ). */
static void write_png(const char *name, int level, int salt)
{
    unsigned char raw[SIDE * (SIDE + 1)];
    for (int y = 0; y < SIDE; y++) {
        raw[y * (SIDE + 1)] = 0;   /* filter: none */
        for (int x = 0; x < SIDE; x++)
            raw[y * (SIDE + 1) + 1 + x] = (unsigned char)(level + ((x * 7 + y * 3 + salt * 5) % 24));
    }
    unsigned char z[256];
    uLongf zn = sizeof z;
    CHECK(compress(z, &zn, raw, sizeof raw) == Z_OK);
    unsigned char ihdr[13] = {0};
    put_be32(ihdr, SIDE);
    put_be32(ihdr + 4, SIDE);
    ihdr[8] = 8;   /* bit depth */
    ihdr[9] = 0;   /* grey */
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f)
        return;
    fwrite("\x89PNG\r\n\x1a\n", 1, 8, f);
    chunk(f, "IHDR", ihdr, 13);
    chunk(f, "IDAT", z, (uint32_t)zn);
    chunk(f, "IEND", NULL, 0);
    fclose(f);
}

static int count_files(const char *sub)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static const char *NET =
    "[data]\nformat = imagefolder\ntrain = imgs\nimage_size = 8\nchannels = 1\n"
    "[train]\nepochs = 8\nbatch = 8\noptimizer = adam\nlearning_rate = 0.05\ndevices = cpu\nkeep = 5\n"
    "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 2\n";

/* A network of another data format: no class names, and no image keys (images resize to its input). */
static const char *SYNTHETIC =
    "[data]\nformat = synthetic\nshape = 6, 6, 1\nclasses = 2\ncount = 60\ntest_count = 20\n"
    "[train]\nepochs = 1\nbatch = 20\ndevices = cpu\n"
    "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 2\n";

int main(void)
{
    if (!make_scratch("ct_clipredict"))
        return 1;
    write_file("net.ini", NET);
    /* class folders sort "bright, light" (label 0) before "dark" (label 1) */
    CHECK(sh("mkdir -p 'imgs/bright, light' imgs/dark new") == 0);
    char name[128];
    for (int i = 0; i < PER_CLASS; i++) {
        snprintf(name, sizeof name, "imgs/dark/d%02d.png", i);
        write_png(name, 10, i);
        snprintf(name, sizeof name, "imgs/bright, light/b%02d.png", i);
        write_png(name, 210, i);
    }
    write_png("new/1_dark.png", 20, 99);
    write_png("new/2_bright.png", 200, 98);
    write_png("new/3_dark.png", 5, 97);

    /* 32 images at batch 8: 4 steps an epoch, the last checkpoint at step 32 */
    CHECK_MSG(run("--config net.ini --checkpoint ck") == 0, "got: %s", out);
    char head[16];
    CHECK_MSG(read_scratch("ck/ckpt-000000000032.ckpt", head, sizeof head) > 12 && head[8] == 3,
              "the checkpoint of a training folder is not format version 3");

    /* a folder: rows by path, in sorted order, the class by name (quoted where it holds a comma) */
    CHECK_MSG(run("predict --config net.ini --weights ck/ckpt-000000000032.ckpt --images new") == 0, "got: %s", out);
    CHECK_MSG(ct_contains(out, "path,class,probability\nnew/1_dark.png,dark,") &&
              ct_contains(out, "\nnew/2_bright.png,\"bright, light\",") && ct_contains(out, "\nnew/3_dark.png,dark,"),
              "got: %s", out);
    /* bare paths (a shell glob), in the order given, to a file */
    CHECK_MSG(run("predict --config net.ini --weights ck/ckpt-000000000032.ckpt new/3_dark.png new/2_bright.png "
                  "--out p.csv") == 0, "got: %s", out);
    CHECK(sh("cat p.csv") == 0);
    CHECK_MSG(strcmp(out, "path,class,probability\n") > 0 && count_of(out, "\n") == 3 &&
              ct_contains(out, "probability\nnew/3_dark.png,dark,") && ct_contains(out, "\nnew/2_bright.png,\"bright"),
              "got: %s", out);

    /* an IDX file of the same size: rows by index, the class by name */
    unsigned char idx[16 + 2 * SIDE * SIDE] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, SIDE, 0, 0, 0, SIDE};
    memset(idx + 16, 15, SIDE * SIDE);
    memset(idx + 16 + SIDE * SIDE, 220, SIDE * SIDE);
    char path[256];
    snprintf(path, sizeof path, "%s/two.idx", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(idx, 1, sizeof idx, f) == sizeof idx);
    if (f)
        fclose(f);
    CHECK_MSG(run("predict --config net.ini --weights ck/ckpt-000000000032.ckpt --images two.idx") == 0 &&
              ct_contains(out, "index,class,probability\n0,dark,") && ct_contains(out, "\n1,\"bright, light\","),
              "got: %s", out);
    /* an IDX file among image paths, and a file that is not an image */
    CHECK_MSG(run("predict --config net.ini --weights ck/ckpt-000000000032.ckpt new two.idx") == 2 &&
              ct_contains(out, "two.idx is an IDX file"), "got: %s", out);
    write_file("notes.png", "not a picture");
    CHECK_MSG(run("predict --config net.ini --weights ck/ckpt-000000000032.ckpt notes.png") == 1 &&
              ct_contains(out, "notes.png"), "got: %s", out);

    /* a network without class names prints indices; its 6x6 input gets the 8x8 files resized */
    write_file("syn.ini", SYNTHETIC);
    CHECK_MSG(run("--config syn.ini --checkpoint syn") == 0, "got: %s", out);
    CHECK_MSG(run("predict --config syn.ini --weights syn/ckpt-000000000003.ckpt --images new") == 0 &&
              ct_contains(out, "path,class,probability\nnew/1_dark.png,") && count_of(out, "\n") == 4 &&
              !ct_contains(out, "png,dark") && !ct_contains(out, "bright, light"), "got: %s", out);
    const char *row = strstr(out, "new/2_bright.png,");
    CHECK_MSG(row && (row[17] == '0' || row[17] == '1') && row[18] == ',', "got: %s", out);

    /* resuming on the same folder continues; after a file is added it is refused, writing nothing */
    CHECK_MSG(run("--config net.ini --resume ck --checkpoint ck --set train.epochs=9") == 0 &&
              ct_contains(out, "resumed from ck/ckpt-000000000032.ckpt"), "got: %s", out);
    int saved = count_files("ck");
    write_png("imgs/dark/extra.png", 30, 55);
    CHECK_MSG(run("--config net.ini --resume ck --checkpoint ck --set train.epochs=10") == 1 &&
              ct_contains(out, "ck/ckpt-000000000036.ckpt: saved from a training folder whose index hash was ") &&
              ct_contains(out, "imgs now hashes to ") &&
              ct_contains(out, "(files added, removed, renamed or resized); train from scratch or restore the folder"),
              "got: %s", out);
    CHECK(count_files("ck") == saved);
    CHECK(sh("rm imgs/dark/extra.png") == 0);
    CHECK_MSG(run("--config net.ini --resume ck --set train.epochs=9") == 0, "restored folder: %s", out);

    remove_scratch();
    return ct_test_done();
}
