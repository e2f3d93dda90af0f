"""Country codes as search services spell them: for providers that localise a search.

A search's `country` option is an ISO 3166-1 alpha-2 code ("NO"); services want other forms: an
English name (Tavily), a locale (SearXNG's `language`), a region code (DuckDuckGo's `no-no`).
These tables cover the countries such services support most widely; for a code that is not listed
a provider sends no location (the search still runs, unlocalised).
"""

from __future__ import annotations

#: ISO code -> (English name, the country's main locale as BCP 47, DuckDuckGo region).
_COUNTRIES: dict[str, tuple[str, str, str]] = {
    "AR": ("Argentina", "es-AR", "ar-es"), "AT": ("Austria", "de-AT", "at-de"),
    "AU": ("Australia", "en-AU", "au-en"), "BE": ("Belgium", "nl-BE", "be-nl"),
    "BG": ("Bulgaria", "bg-BG", "bg-bg"), "BR": ("Brazil", "pt-BR", "br-pt"),
    "CA": ("Canada", "en-CA", "ca-en"), "CH": ("Switzerland", "de-CH", "ch-de"),
    "CL": ("Chile", "es-CL", "cl-es"), "CN": ("China", "zh-CN", "cn-zh"),
    "CO": ("Colombia", "es-CO", "co-es"), "CZ": ("Czech Republic", "cs-CZ", "cz-cs"),
    "DE": ("Germany", "de-DE", "de-de"), "DK": ("Denmark", "da-DK", "dk-da"),
    "EE": ("Estonia", "et-EE", "ee-et"), "EG": ("Egypt", "ar-EG", "xa-ar"),
    "ES": ("Spain", "es-ES", "es-es"), "FI": ("Finland", "fi-FI", "fi-fi"),
    "FR": ("France", "fr-FR", "fr-fr"), "GB": ("United Kingdom", "en-GB", "uk-en"),
    "GR": ("Greece", "el-GR", "gr-el"), "HK": ("Hong Kong", "zh-HK", "hk-tzh"),
    "HR": ("Croatia", "hr-HR", "hr-hr"), "HU": ("Hungary", "hu-HU", "hu-hu"),
    "ID": ("Indonesia", "id-ID", "id-id"), "IE": ("Ireland", "en-IE", "ie-en"),
    "IL": ("Israel", "he-IL", "il-he"), "IN": ("India", "en-IN", "in-en"),
    "IT": ("Italy", "it-IT", "it-it"), "JP": ("Japan", "ja-JP", "jp-jp"),
    "KR": ("South Korea", "ko-KR", "kr-kr"), "LT": ("Lithuania", "lt-LT", "lt-lt"),
    "LV": ("Latvia", "lv-LV", "lv-lv"), "MX": ("Mexico", "es-MX", "mx-es"),
    "MY": ("Malaysia", "ms-MY", "my-ms"), "NL": ("Netherlands", "nl-NL", "nl-nl"),
    "NO": ("Norway", "nb-NO", "no-no"), "NZ": ("New Zealand", "en-NZ", "nz-en"),
    "PE": ("Peru", "es-PE", "pe-es"), "PH": ("Philippines", "en-PH", "ph-en"),
    "PL": ("Poland", "pl-PL", "pl-pl"), "PT": ("Portugal", "pt-PT", "pt-pt"),
    "RO": ("Romania", "ro-RO", "ro-ro"), "RU": ("Russia", "ru-RU", "ru-ru"),
    "SA": ("Saudi Arabia", "ar-SA", "xa-ar"), "SE": ("Sweden", "sv-SE", "se-sv"),
    "SG": ("Singapore", "en-SG", "sg-en"), "SI": ("Slovenia", "sl-SI", "sl-sl"),
    "SK": ("Slovakia", "sk-SK", "sk-sk"), "TH": ("Thailand", "th-TH", "th-th"),
    "TR": ("Turkey", "tr-TR", "tr-tr"), "TW": ("Taiwan", "zh-TW", "tw-tzh"),
    "UA": ("Ukraine", "uk-UA", "ua-uk"), "US": ("United States", "en-US", "us-en"),
    "VE": ("Venezuela", "es-VE", "ve-es"), "VN": ("Vietnam", "vi-VN", "vn-vi"),
    "ZA": ("South Africa", "en-ZA", "za-en"),
}


def _entry(country: str | None) -> tuple[str, str, str] | None:
    return _COUNTRIES.get(country.strip().upper()) if country else None


def country_name(country: str | None) -> str | None:
    """"NO" -> "Norway"; None for a code not listed."""
    entry = _entry(country)
    return entry[0] if entry else None


def country_locale(country: str | None) -> str | None:
    """"NO" -> "nb-NO" (the country's main language); None for a code not listed."""
    entry = _entry(country)
    return entry[1] if entry else None


def ddg_region(country: str | None) -> str | None:
    """"GB" -> "uk-en", DuckDuckGo's region code; None for a code not listed."""
    entry = _entry(country)
    return entry[2] if entry else None
