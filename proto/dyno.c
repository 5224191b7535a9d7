/*
 * dyno: see dyno.h. Replies are built with cJSON, inserting keys in
 * alphabetical order, so the printed bytes equal Dynolog's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonint.h"
#include "dyno.h"
#include "frame.h"
#include "jsoncheck.h"
#include "msg.h"

bool dyno_is_request(const char *json, size_t len)
{
	size_t i;
	int depth = 0;

	/* Look for the key "fn" at depth 1; strings are skipped so that a
	 * value containing "fn" does not count. */
	for (i = 0; i < len; i++) {
		char c = json[i];

		if (c == '"') {
			size_t start = ++i;

			while (i < len && json[i] != '"')
				i += json[i] == '\\' ? 2 : 1;
			if (depth == 1 && i < len && i - start == 2 &&
			    memcmp(json + start, "fn", 2) == 0) {
				size_t j = i + 1;

				while (j < len && (json[j] == ' ' || json[j] == '\n' ||
				                   json[j] == '\r' || json[j] == '\t'))
					j++;
				if (j < len && json[j] == ':')
					return true;
			}
		} else if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']')
			depth--;
	}
	return false;
}

static const struct {
	const char *name;
	enum dyno_fn fn;
} fns[] = {
	{ "getStatus", DYNO_GET_STATUS },
	{ "getVersion", DYNO_GET_VERSION },
	{ "setKinetOnDemandRequest", DYNO_SET_KINETO_ONDEMAND },
	{ "dcgmProfPause", DYNO_DCGM_PAUSE },
	{ "dcgmProfResume", DYNO_DCGM_RESUME },
};

static int get_int(const cJSON *root, const char *key, int64_t lo, int64_t hi,
                   int64_t *v, struct perr *err)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
	double d;

	if (j == NULL)
		return 0;
	if (!cJSON_IsNumber(j))
		return perr_set(err, -EBADMSG, "\"%s\" must be an integer", key);
	d = j->valuedouble;
	if (!isfinite(d) || floor(d) != d || d < (double)lo || d > (double)hi)
		return perr_set(err, -EBADMSG, "\"%s\" must be an integer in %lld..%lld",
		                key, (long long)lo, (long long)hi);
	*v = (int64_t)d;
	return 0;
}

static int decode_kineto(struct dyno_request *r, const cJSON *root, struct perr *err)
{
	const cJSON *config, *pids, *e;
	int rc;

	config = cJSON_GetObjectItemCaseSensitive(root, "config");
	pids = cJSON_GetObjectItemCaseSensitive(root, "pids");
	if (config == NULL || pids == NULL)
		return perr_set(err, -EINVAL, "setKinetOnDemandRequest needs \"config\" "
		                "and \"pids\" (use [0] for every process of the job)");
	if (!cJSON_IsString(config))
		return perr_set(err, -EBADMSG, "\"config\" must be a string of "
		                "KEY=VALUE lines");
	if (strlen(config->valuestring) > DYNO_CONFIG_MAX)
		return perr_set(err, -EBADMSG, "\"config\" is longer than %d bytes",
		                DYNO_CONFIG_MAX);
	if (!cJSON_IsArray(pids))
		return perr_set(err, -EBADMSG, "\"pids\" must be an array of integers");
	if (cJSON_GetArraySize(pids) > DYNO_PIDS_MAX)
		return perr_set(err, -EBADMSG, "\"pids\" has more than %d entries",
		                DYNO_PIDS_MAX);
	r->config = config->valuestring;
	cJSON_ArrayForEach(e, pids) {
		if (!cJSON_IsNumber(e) || floor(e->valuedouble) != e->valuedouble ||
		    e->valuedouble < 0 || e->valuedouble > (double)MSG_PID_MAX)
			return perr_set(err, -EBADMSG, "\"pids\" must hold integers in 0..%d "
			                "(0: every process of the job)", MSG_PID_MAX);
		r->pids[r->npids++] = (int32_t)e->valuedouble;
	}
	rc = get_int(root, "job_id", INT64_MIN / 2, INT64_MAX / 2, &r->job_id, err);
	if (rc == 0)
		rc = get_int(root, "process_limit", 0, 1000000, &r->process_limit, err);
	return rc;
}

int dyno_decode_request(struct dyno_request *r, const char *json, size_t len,
                        struct perr *err)
{
	const cJSON *fn;
	cJSON *root;
	size_t i;
	int rc;

	memset(r, 0, sizeof(*r));
	r->process_limit = DYNO_PROCESS_LIMIT_DEFAULT;
	rc = jsoncheck_text(json, len, JSONCHECK_DEPTH_DEFAULT, err);
	if (rc < 0)
		return rc;
	root = cJSON_ParseWithLength(json, len);
	if (root == NULL)
		return perr_set(err, -EBADMSG, "request is not valid JSON");
	r->root_ = root;
	fn = cJSON_GetObjectItemCaseSensitive(root, "fn");
	if (!cJSON_IsObject(root) || !cJSON_IsString(fn)) {
		rc = perr_set(err, -EBADMSG, "request must be a JSON object with a "
		              "string \"fn\"");
		goto out;
	}
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (strcmp(fn->valuestring, fns[i].name) == 0)
			break;
	if (i == sizeof(fns) / sizeof(fns[0])) {
		rc = perr_set(err, -EOPNOTSUPP, "unknown fn \"%.60s\"; gprofd serves "
		              "getStatus, getVersion, setKinetOnDemandRequest, "
		              "dcgmProfPause, dcgmProfResume", fn->valuestring);
		goto out;
	}
	r->fn = fns[i].fn;
	if (r->fn == DYNO_SET_KINETO_ONDEMAND)
		rc = decode_kineto(r, root, err);
	else if (r->fn == DYNO_DCGM_PAUSE)
		rc = get_int(root, "duration_s", 0, 86400 * 365, &r->duration_s, err);
out:
	if (rc < 0)
		dyno_request_deinit(r);
	return rc;
}

void dyno_request_deinit(struct dyno_request *r)
{
	cJSON_Delete(r->root_);
	r->root_ = NULL;
	r->config = NULL;
}

/* Prints obj compactly and appends it as a frame; takes ownership of obj. */
static int emit(struct pbuf *out, cJSON *obj)
{
	char *text;
	int r;

	if (obj == NULL)
		return -ENOMEM;
	text = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	if (text == NULL)
		return -ENOMEM;
	r = frame_encode_json(out, text, strlen(text));
	cJSON_free(text);
	return r;
}

int dyno_encode_status(struct pbuf *out)
{
	cJSON *o = cJSON_CreateObject();

	if (o != NULL)
		jsonint_add(o, "status", 1);
	return emit(out, o);
}

int dyno_encode_version(struct pbuf *out, const char *version)
{
	cJSON *o = cJSON_CreateObject();

	if (o != NULL)
		cJSON_AddStringToObject(o, "version", version);
	return emit(out, o);
}

int dyno_encode_dcgm(struct pbuf *out, bool ok)
{
	cJSON *o = cJSON_CreateObject();

	if (o != NULL)
		cJSON_AddBoolToObject(o, "status", ok);
	return emit(out, o);
}

int dyno_encode_failed(struct pbuf *out, const char *error)
{
	cJSON *o = cJSON_CreateObject();

	if (o != NULL) {
		cJSON_AddStringToObject(o, "error", error);
		cJSON_AddStringToObject(o, "status", "failed");
	}
	return emit(out, o);
}

static cJSON *int_array(const int32_t *v, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; a != NULL && i < n; i++)
		jsonint_add(a, NULL, v[i]);
	return a;
}

int dyno_encode_kineto_reply(struct pbuf *out, const struct dyno_kineto_reply *rep)
{
	cJSON *o = cJSON_CreateObject();

	if (o != NULL) {
		jsonint_add(o, "activityProfilersBusy", rep->busy);
		cJSON_AddItemToObject(o, "activityProfilersTriggered",
		                      int_array(rep->triggered, rep->ntriggered));
		jsonint_add(o, "eventProfilersBusy", 0);
		cJSON_AddItemToObject(o, "eventProfilersTriggered", cJSON_CreateArray());
		cJSON_AddItemToObject(o, "processesMatched",
		                      int_array(rep->matched, rep->nmatched));
		if (rep->trace_id != NULL)
			cJSON_AddStringToObject(o, "traceId", rep->trace_id);
	}
	return emit(out, o);
}

int dyno_encode_request(struct pbuf *out, const struct dyno_request *req)
{
	static const char *const names[] = {
		[DYNO_GET_STATUS] = "getStatus",
		[DYNO_GET_VERSION] = "getVersion",
		[DYNO_SET_KINETO_ONDEMAND] = "setKinetOnDemandRequest",
		[DYNO_DCGM_PAUSE] = "dcgmProfPause",
		[DYNO_DCGM_RESUME] = "dcgmProfResume",
	};
	cJSON *o = cJSON_CreateObject();

	if (o == NULL)
		return -ENOMEM;
	cJSON_AddStringToObject(o, "fn", names[req->fn]);
	if (req->fn == DYNO_SET_KINETO_ONDEMAND) {
		cJSON_AddStringToObject(o, "config", req->config ? req->config : "");
		jsonint_add(o, "job_id", req->job_id);
		cJSON_AddItemToObject(o, "pids", int_array(req->pids, req->npids));
		jsonint_add(o, "process_limit", req->process_limit);
	} else if (req->fn == DYNO_DCGM_PAUSE)
		jsonint_add(o, "duration_s", req->duration_s);
	return emit(out, o);
}
