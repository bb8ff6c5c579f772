/* zsqueeze: a small compressor of ours linked against Debian's zlib (zlib1g-dev), the
   "program nobody here wrote the hot code of" in kansoku's benchmarks: stdin is deflated
   into stdout (zlib format), at the level given as the first argument (default 6).
   Build: cc -O2 -g -o zsqueeze bench/c/zsqueeze.c -lz */
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

int main(int argc, char **argv)
{
    static unsigned char in[1 << 16], out[1 << 16];
    int level = argc > 1 ? atoi(argv[1]) : 6;
    z_stream z = {0};
    if (deflateInit(&z, level) != Z_OK)
        return 2;
    int flush;
    do {
        z.avail_in = fread(in, 1, sizeof in, stdin);
        z.next_in = in;
        flush = feof(stdin) ? Z_FINISH : Z_NO_FLUSH;
        do {
            z.avail_out = sizeof out;
            z.next_out = out;
            if (deflate(&z, flush) == Z_STREAM_ERROR)
                return 3;
            fwrite(out, 1, sizeof out - z.avail_out, stdout);
        } while (z.avail_out == 0);
    } while (flush != Z_FINISH);
    deflateEnd(&z);
    return ferror(stdout) ? 4 : 0;
}
