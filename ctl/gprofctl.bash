# bash completion for gprofctl (installed into bash-completion's directory)
_gprofctl()
{
	local cur prev words cword
	_init_completion || return
	local globals="--host --hostfile --slurm-job --socket --port --token-file --tls --tls-ca --tls-cert --tls-key --json --timeout --version --help"
	local commands="status list traces trace metrics fetch delete cancel launch report help"
	local cmd="" i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--host|--hostfile|--slurm-job|--socket|--port|--token-file|--tls-ca|--tls-cert|--tls-key|--timeout) ((i++)) ;;
		-*) ;;
		*) cmd=${words[i]}; break ;;
		esac
	done
	case $prev in
	--hostfile|--socket|--token-file|--tls-ca|--tls-cert|--tls-key|--output-dir|--agent)
		_filedir
		return ;;
	--activities)
		local acts="kernel memcpy memset cuda_runtime cuda_driver sync overhead memory nvtx"
		local pre=${cur%,*}
		[[ $cur == *,* ]] && pre="$pre," || pre=""
		COMPREPLY=($(compgen -P "$pre" -W "$acts" -- "${cur##*,}"))
		compopt -o nospace
		return ;;
	--host|--slurm-job|--port|--timeout|--job|--pid|--iterations|--duration-ms|--start-at|\
	--iteration-roundup|--iteration-range|--process-limit|--trace-id|--top|--since|--older-than)
		return ;;
	esac
	case $cmd in
	"") COMPREPLY=($(compgen -W "$globals $commands" -- "$cur")) ;;
	trace) COMPREPLY=($(compgen -W "--job --pid --iterations --duration-ms --start-at
	                      --iteration-roundup --iteration-range --activities --process-limit --output-dir
	                      --trace-id --timeout --report --record-shapes --profile-memory --with-stack
	                      --with-flops --with-modules --operators --memory-snapshot --json --help" -- "$cur")) ;;
	report) [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--top --html --group-by-shape --json --help" -- "$cur")) || _filedir ;;
	list) COMPREPLY=($(compgen -W "--job --json --help" -- "$cur")) ;;
	traces) COMPREPLY=($(compgen -W "--job --since --older-than --json --help" -- "$cur")) ;;
	fetch) COMPREPLY=($(compgen -W "--job --since --output-dir --json --help" -- "$cur")) ;;
	delete) COMPREPLY=($(compgen -W "--job --older-than --json --help" -- "$cur")) ;;
	cancel) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
	launch) COMPREPLY=($(compgen -W "--job --agent --json --help --" -- "$cur")) ;;
	help) COMPREPLY=($(compgen -W "$commands --json" -- "$cur")) ;;
	status) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
	metrics) COMPREPLY=($(compgen -W "--watch --json --help" -- "$cur")) ;;
	esac
}
complete -F _gprofctl gprofctl
