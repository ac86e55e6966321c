/* Decode only the part of a JPEG that a crop needs: the pil backend's fast path (jpeg_region.py).
 *
 * Why our own: Pillow, simplejpeg and torchvision.io decode whole images, and a random-resized
 * crop keeps about half of one. libjpeg-turbo can do less: jpeg_crop_scanline limits the inverse
 * DCT, upsampling and colour conversion to the crop's columns, and jpeg_skip_scanlines passes the
 * rows above it with entropy decoding only. The rows below are entropy-decoded too unless the
 * caller knows the file is whole, so a JPEG whose data is cut short fails here whatever the crop
 * (as it does in every backend).
 *
 * Strict, like simplejpeg's strict mode: libjpeg's warnings (corrupt or missing data) are errors,
 * raised as ValueError with libjpeg's message, and the caller decides (probe.truncation_reason).
 * The GIL is released while decoding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

typedef struct {
    struct jpeg_error_mgr base;
    jmp_buf escape;
    char message[JMSG_LENGTH_MAX];
} strict_errors;

static void fail(j_common_ptr cinfo) {
    strict_errors *errors = (strict_errors *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, errors->message);
    longjmp(errors->escape, 1);
}

static void fail_on_warning(j_common_ptr cinfo, int level) {
    if (level < 0) /* a warning; levels 0 and up are trace messages */
        fail(cinfo);
}

typedef struct {
    int scale, left, top, width, height; /* the wanted region, in pixels of the 1/scale image */
    unsigned char *out;                  /* rows of 4-byte RGBX pixels, `out_width` apart, and one spare */
    Py_ssize_t capacity;                 /* bytes at `out` */
    int read_to_end;                     /* 0: stop after the region (the caller knows the data is whole) */
    int out_left, out_width;             /* the columns decoded: jpeg_crop_scanline widens to iMCU edges */
    int unsupported;                     /* a colour space libjpeg cannot turn into RGB (CMYK, YCCK) */
} region_request;

/* Returns 0, or -1 with `errors->message` set; runs without the GIL. */
static int decode(const unsigned char *data, Py_ssize_t size, region_request *request, strict_errors *errors) {
    struct jpeg_decompress_struct cinfo;
    JSAMPROW rows[16];
    cinfo.err = jpeg_std_error(&errors->base);
    errors->base.error_exit = fail;
    errors->base.emit_message = fail_on_warning;
    if (setjmp(errors->escape)) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        request->unsupported = 1;
        jpeg_destroy_decompress(&cinfo);
        return 0;
    }
    cinfo.out_color_space = JCS_EXT_RGBX;
    cinfo.scale_num = 1;
    cinfo.scale_denom = (unsigned int)request->scale;
    jpeg_start_decompress(&cinfo);
    if (request->left < 0 || request->top < 0 || request->width <= 0 || request->height <= 0 ||
        (JDIMENSION)(request->left + request->width) > cinfo.output_width ||
        (JDIMENSION)(request->top + request->height) > cinfo.output_height) {
        snprintf(errors->message, JMSG_LENGTH_MAX, "region %dx%d at (%d, %d) outside the %ux%u image",
                 request->width, request->height, request->left, request->top, cinfo.output_width,
                 cinfo.output_height);
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    JDIMENSION left = (JDIMENSION)request->left, width = (JDIMENSION)request->width;
    if (width < cinfo.output_width)
        jpeg_crop_scanline(&cinfo, &left, &width);
    if ((Py_ssize_t)width * 4 * (request->height + 1) > request->capacity) {
        snprintf(errors->message, JMSG_LENGTH_MAX, "output buffer of %zd bytes too small", request->capacity);
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    request->out_left = (int)left;
    request->out_width = (int)width;
    if (request->top > 0)
        jpeg_skip_scanlines(&cinfo, (JDIMENSION)request->top);
    int done = 0;
    while (done < request->height) {
        int wanted = request->height - done < 16 ? request->height - done : 16;
        for (int i = 0; i < wanted; i++)
            rows[i] = request->out + (size_t)(done + i) * width * 4;
        done += (int)jpeg_read_scanlines(&cinfo, rows, (JDIMENSION)wanted);
    }
    if (!request->read_to_end) {
        jpeg_destroy_decompress(&cinfo); /* also aborts the decode */
        return 0;
    }
    /* Skipping to the very end would stop reading (libjpeg takes that as "done"), so skip to the
     * last row and decode that one, into the spare row after the region. */
    if (cinfo.output_scanline < cinfo.output_height) {
        if (cinfo.output_scanline < cinfo.output_height - 1)
            jpeg_skip_scanlines(&cinfo, cinfo.output_height - 1 - cinfo.output_scanline);
        rows[0] = request->out + (size_t)request->height * width * 4;
        jpeg_read_scanlines(&cinfo, rows, 1);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return 0;
}

static PyObject *decode_region(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    region_request request = {0};
    strict_errors errors;
    if (!PyArg_ParseTuple(args, "y*iiiiiw*p", &data, &request.scale, &request.left, &request.top,
                          &request.width, &request.height, &out, &request.read_to_end))
        return NULL;
    if (request.scale != 1 && request.scale != 2 && request.scale != 4 && request.scale != 8) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&out);
        return PyErr_Format(PyExc_ValueError, "scale must be 1, 2, 4 or 8, not %d", request.scale);
    }
    request.out = out.buf;
    request.capacity = out.len;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = decode(data.buf, data.len, &request, &errors);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    if (status != 0)
        return PyErr_Format(PyExc_ValueError, "%s", errors.message);
    if (request.unsupported)
        Py_RETURN_NONE;
    return Py_BuildValue("(ii)", request.out_left, request.out_width);
}

static PyMethodDef methods[] = {
    {"decode_region", decode_region, METH_VARARGS,
     "decode_region(data, scale, left, top, width, height, out, read_to_end) -> (out_left, out_width) or None\n\n"
     "Decode rows top..top+height of the JPEG `data` at 1/scale into `out` as RGBX rows of out_width\n"
     "pixels, starting at column out_left <= left (widened to iMCU edges); `out` needs room for one\n"
     "row more, which is overwritten. read_to_end: entropy-decode the rest of the data, so that a\n"
     "truncation below the region is reported too. None for CMYK or YCCK\n"
     "JPEGs; ValueError with libjpeg's message on any error or warning."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jpeg_region", NULL, -1, methods};

PyMODINIT_FUNC PyInit__jpeg_region(void) { return PyModule_Create(&module); }
