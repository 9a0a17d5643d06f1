/* towerpack.dataflow.image._jpeg_window: decode one window of a JPEG, and nothing below it.
 *
 * libjpeg-turbo can leave out what a crop does not keep (jpeg_skip_scanlines for the rows above
 * the window, which are entropy-decoded only; jpeg_crop_scanline for the columns beside it, which
 * skip the inverse DCT, upsampling and colour conversion; the rows below are never read), as
 * TensorFlow's decode_and_crop_jpeg does. No maintained Python binding exposes it (PyTurboJPEG's
 * crop is a lossless transcode, simplejpeg and OpenCV decode whole images), hence these few calls.
 *
 * decode_window(data, scale, y0, x0, height, width, out, color) decodes the JPEG in `data` at
 * 1/`scale` of its size (1, 2, 4 or 8) and writes rows y0..y0+height-1 and columns
 * x0..x0+width-1 of the result to `out` (a writable buffer of height * width * channels bytes),
 * `color` 0 for BGR, 1 for RGB, 2 for grey. The pixels are those of decoding everything and
 * cropping: the decoded region reaches a few columns past the window on either side, since
 * libjpeg's smooth chroma upsampling treats the region's edges as the image's. Corrupt data,
 * warnings included, raise ValueError with libjpeg's message. The GIL is released while decoding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

/* Columns decoded on either side of the window (one chroma sample of 2x subsampling, and more). */
#define MARGIN 4

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} error_manager;

static void stop_on_error(j_common_ptr cinfo) {
    error_manager *err = (error_manager *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

static void stop_on_warning(j_common_ptr cinfo, int level) {
    if (level < 0) { /* corrupt data: libjpeg would go on and fill in grey */
        stop_on_error(cinfo);
    }
}

static PyObject *decode_window(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    int scale, y0, x0, height, width, color;
    if (!PyArg_ParseTuple(args, "y*iiiiiw*i", &data, &scale, &y0, &x0, &height, &width, &out, &color)) {
        return NULL;
    }
    const int channels = color == 2 ? 1 : 3;
    const char *problem = NULL;
    if (scale != 1 && scale != 2 && scale != 4 && scale != 8) {
        problem = "scale must be 1, 2, 4 or 8";
    } else if (color < 0 || color > 2) {
        problem = "color must be 0 (BGR), 1 (RGB) or 2 (grey)";
    } else if (y0 < 0 || x0 < 0 || height < 1 || width < 1) {
        problem = "the window must have a non-negative origin and a positive size";
    } else if (out.len < (Py_ssize_t)height * width * channels) {
        problem = "the output buffer is smaller than the window";
    }
    if (problem != NULL) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }

    struct jpeg_decompress_struct cinfo;
    error_manager err;
    /* Written between setjmp and a possible longjmp: volatile, so that they are read back right. */
    JSAMPROW volatile row = NULL;
    volatile int outside = 0, ok = 0;
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = stop_on_error;
    err.pub.emit_message = stop_on_warning;
    err.message[0] = '\0';
    jpeg_create_decompress(&cinfo);

    Py_BEGIN_ALLOW_THREADS
    if (setjmp(err.jump) == 0) {
        jpeg_mem_src(&cinfo, (const unsigned char *)data.buf, (unsigned long)data.len);
        jpeg_read_header(&cinfo, TRUE);
        cinfo.out_color_space = color == 2 ? JCS_GRAYSCALE : (color == 1 ? JCS_EXT_RGB : JCS_EXT_BGR);
        cinfo.scale_num = 1;
        cinfo.scale_denom = (unsigned int)scale;
        jpeg_start_decompress(&cinfo);
        const int rows = (int)cinfo.output_height, cols = (int)cinfo.output_width;
        if ((long long)y0 + height > rows || (long long)x0 + width > cols) {
            outside = 1;
        } else {
            const int start = x0 > MARGIN ? x0 - MARGIN : 0;
            const int end = x0 + width + MARGIN < cols ? x0 + width + MARGIN : cols; /* x0 + width <= cols */
            JDIMENSION first = (JDIMENSION)start, count = (JDIMENSION)(end - start);
            jpeg_crop_scanline(&cinfo, &first, &count); /* widens the region to whole blocks */
            JSAMPROW buffer = (JSAMPROW)malloc((size_t)count * channels);
            row = buffer;
            if (buffer != NULL) {
                if (y0 > 0) {
                    jpeg_skip_scanlines(&cinfo, (JDIMENSION)y0);
                }
                const size_t skip = (size_t)(x0 - (int)first) * channels, line = (size_t)width * channels;
                unsigned char *dst = (unsigned char *)out.buf;
                for (int r = 0; r < height; r++) {
                    jpeg_read_scanlines(&cinfo, &buffer, 1);
                    memcpy(dst + (size_t)r * line, buffer + skip, line);
                }
                ok = 1;
            }
        }
    }
    Py_END_ALLOW_THREADS

    free((void *)row);
    jpeg_destroy_decompress(&cinfo); /* also ends a decompression stopped after the window */
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    if (outside) {
        PyErr_SetString(PyExc_ValueError, "the window does not fit the decoded image");
        return NULL;
    }
    if (!ok) {
        if (err.message[0] == '\0') {
            return PyErr_NoMemory();
        }
        PyErr_Format(PyExc_ValueError, "cannot decode the JPEG: %s", err.message);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_window", decode_window, METH_VARARGS,
     "decode_window(data, scale, y0, x0, height, width, out, color): one window of a JPEG into out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jpeg_window",
                                    "Decode one window of a JPEG (libjpeg-turbo's partial decoding).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__jpeg_window(void) { return PyModule_Create(&module); }
